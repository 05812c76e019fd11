-- Argo CD health of an agentrewind.io ForkRun (a fork, or a replay-suite regression test).
--   Progressing: no status yet, a spec generation not observed yet (a commit changed the spec, so it
--                runs again), waiting for its session, or its Job running (Reconciling).
--   Degraded:    Stalled: a replay that diverged (a failing regression test turns the app red; the
--                message names the step and the call), a fork that missed its goal or diverged, a Job
--                that failed, an invalid spec.
--   Healthy:     Ready: a replay that passed, a fork that reached its goal or completed.
-- The Ready, Reconciling and Stalled conditions and observedGeneration, read the way kstatus reads
-- them. Argo CD runs a custom check without Lua's string library, so only base functions are used.
local function condition(kind)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function explain(c)
  if c.message == nil or c.message == "" or c.message == c.reason then
    return c.reason
  end
  return c.reason .. ": " .. c.message
end

local ready, reconciling, stalled = condition("Ready"), condition("Reconciling"), condition("Stalled")
if ready == nil and reconciling == nil and stalled == nil then
  return {status = "Progressing", message = "Waiting for the operator to report status"}
end
local generation = obj.metadata.generation
local observed = obj.status.observedGeneration
if observed == nil and ready ~= nil then
  observed = ready.observedGeneration
end
if generation ~= nil and observed ~= nil and observed < generation then
  return {status = "Progressing", message = "Generation " .. generation .. " is not observed yet (status is of generation " .. observed .. ")"}
end
if stalled ~= nil and stalled.status == "True" then
  return {status = "Degraded", message = explain(stalled)}
end
if reconciling ~= nil and reconciling.status == "True" then
  return {status = "Progressing", message = explain(reconciling)}
end
if ready == nil or ready.status ~= "True" then
  if ready ~= nil then
    return {status = "Progressing", message = explain(ready)}
  end
  return {status = "Progressing", message = "Waiting for the operator to report status"}
end
return {status = "Healthy", message = explain(ready)}
