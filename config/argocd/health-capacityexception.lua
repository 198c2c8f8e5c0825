-- ArgoCD health for policy.karpenter.sh/CapacityException.
-- Progressing until the controller has seen this generation; Healthy while the exception
-- applies (Active=True); Degraded once it has expired, so that the application shows an
-- exception Git still holds though it no longer applies (remove it, or renew it).
local hs = {}
if obj.status == nil or obj.status.conditions == nil or obj.status.observedGeneration == nil
    or obj.status.observedGeneration < obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the exception to be evaluated"
  return hs
end
local active, expired
for _, c in ipairs(obj.status.conditions) do
  if c.type == "Active" then active = c end
  if c.type == "Expired" then expired = c end
end
if expired ~= nil and expired.status == "True" then
  hs.status = "Degraded"
  hs.message = "Expired: " .. (expired.message or "")
  return hs
end
if active ~= nil and active.status == "True" then
  hs.status = "Healthy"
  hs.message = active.message or "Active"
  return hs
end
hs.status = "Progressing"
hs.message = "Not active yet"
return hs
