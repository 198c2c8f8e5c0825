-- ArgoCD health for policy.karpenter.sh/CapacityPolicy.
-- Progressing until the controller has compiled this generation; Degraded when the modules do
-- not compile or their tests fail (Ready=False); Healthy otherwise, noting evaluation errors.
local hs = {}
if obj.status == nil or obj.status.conditions == nil or obj.status.observedGeneration == nil
    or obj.status.observedGeneration < obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the policy to be compiled"
  return hs
end
local ready, compiled, tests, failed
for _, c in ipairs(obj.status.conditions) do
  if c.type == "Ready" then ready = c end
  if c.type == "Compiled" then compiled = c end
  if c.type == "TestsPassed" then tests = c end
  if c.type == "EvaluationFailed" then failed = c end
end
if ready == nil or ready.status ~= "True" then
  hs.status = "Degraded"
  if compiled ~= nil and compiled.status ~= "True" then
    hs.message = "Does not compile: " .. (compiled.message or "")
  elseif tests ~= nil and tests.status ~= "True" then
    hs.message = "Tests fail: " .. (tests.message or "")
  else
    hs.message = "Not ready"
  end
  return hs
end
hs.status = "Healthy"
hs.message = "Compiled and tested"
if failed ~= nil and failed.status == "True" then
  hs.message = hs.message .. "; " .. (failed.message or "evaluation errors")
end
return hs
