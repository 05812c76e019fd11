-- Argo CD health of an agentrewind.io ResumePlan (the verdict on whether a run can resume).
--   Progressing: no status yet, a spec generation not observed yet, waiting for the session to be
--                verified, or its Job running (Reconciling).
--   Degraded:    Stalled (the Job failed, evidence cannot be read), or the verdict is Diverged: the run
--                left its plan and needs a human; the garbage collector keeps it however old it is.
--   Suspended:   the verdict is Resumable: the run is paused and can be resumed from its re-entry
--                point, which is what Argo CD's Suspended means (waiting for someone to resume it).
--   Healthy:     the verdict is Complete, or Unresumable: nothing is left to do or nothing can be done,
--                and the garbage collector may delete the run. Unresumable is also the verdict on every
--                run recorded without an intent ledger (NoIntent), so red there would be noise.
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
local verdict = obj.status.verdict
if verdict == nil then
  return {status = "Progressing", message = explain(ready)}
end
local message = verdict
if obj.status.reason ~= nil then
  message = message .. " (" .. obj.status.reason .. ")"
end
if obj.status.message ~= nil then
  message = message .. ": " .. obj.status.message
end
if verdict == "Diverged" then
  return {status = "Degraded", message = message}
end
if verdict == "Resumable" then
  return {status = "Suspended", message = message}
end
return {status = "Healthy", message = message}
