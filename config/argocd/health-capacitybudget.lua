-- ArgoCD health for policy.karpenter.sh/CapacityBudget and ClusterCapacityBudget (the same
-- status). Progressing until the controller has evaluated this generation; Degraded when it
-- cannot evaluate the budget or the namespace (its namespaces together) runs over its hourly limit; Healthy otherwise (a Spot
-- share out of range is reported in the message).
local hs = {}
if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the budget to be evaluated"
  return hs
end
if obj.status.observedGeneration == nil or obj.status.observedGeneration < obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the budget's new spec to be evaluated"
  return hs
end
local ready, exceeded, spot
for _, c in ipairs(obj.status.conditions) do
  if c.type == "Ready" then ready = c end
  if c.type == "BudgetExceeded" then exceeded = c end
  if c.type == "SpotShareOutOfRange" then spot = c end
end
if ready == nil or ready.status ~= "True" then
  hs.status = "Degraded"
  hs.message = (ready and ready.message) or "The budget could not be evaluated"
  return hs
end
if exceeded ~= nil and exceeded.status == "True" then
  hs.status = "Degraded"
  hs.message = "Over budget: " .. (exceeded.message or "")
  return hs
end
hs.status = "Healthy"
hs.message = "Hourly cost " .. (obj.status.hourlyCost or "0") .. " of " .. (obj.status.hourlyLimit or "no limit")
if spot ~= nil and spot.status == "True" then
  hs.message = hs.message .. "; " .. (spot.message or "Spot share out of range")
end
return hs
