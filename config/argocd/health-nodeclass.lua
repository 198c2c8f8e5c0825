-- ArgoCD health for karpenter.kwok.sh/KWOKNodeClass and karpenter.k8s.aws/EC2NodeClass:
-- Healthy on Ready=True for this generation, Degraded on Ready=False, Progressing otherwise.
local hs = {}
if obj.status ~= nil and obj.status.conditions ~= nil then
  for _, c in ipairs(obj.status.conditions) do
    if c.type == "Ready" and (c.observedGeneration == nil or c.observedGeneration >= obj.metadata.generation) then
      if c.status == "True" then
        hs.status = "Healthy"
        hs.message = c.message or ""
        return hs
      elseif c.status == "False" then
        hs.status = "Degraded"
        hs.message = c.message or c.reason or "Not ready"
        return hs
      end
    end
  end
end
hs.status = "Progressing"
hs.message = "Waiting for the node class to be ready"
return hs
