-- ArgoCD health for karpenter.sh/NodeOverlay: Degraded when ValidationSucceeded is False for
-- this generation (a conflict with another overlay of the same weight, or an invalid
-- requirement or capacity: the overlay is not applied), Healthy when it is True, and Healthy
-- without status too: with the NodeOverlay feature gate off no controller writes one, and
-- admission already warned that the overlay changes nothing.
local hs = {}
if obj.status ~= nil and obj.status.conditions ~= nil then
  for _, c in ipairs(obj.status.conditions) do
    if c.type == "ValidationSucceeded" then
      if c.observedGeneration ~= nil and c.observedGeneration < obj.metadata.generation then
        hs.status = "Progressing"
        hs.message = "Waiting for the new spec to be resolved"
        return hs
      end
      if c.status == "False" then
        hs.status = "Degraded"
        hs.message = "Not applied (" .. (c.reason or "") .. "): " .. (c.message or "")
        return hs
      end
      hs.status = "Healthy"
      hs.message = "Applied"
      return hs
    end
  end
end
hs.status = "Healthy"
hs.message = "No status: the NodeOverlay feature gate may be off"
return hs
