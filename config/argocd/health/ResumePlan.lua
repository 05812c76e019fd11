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
-- @common
local verdict = text(field(status, "verdict"))
if verdict == nil or verdict == "" then
  return {status = "Progressing", message = explain(ready)}
end
local message = verdict
local reason, detail = text(field(status, "reason")), text(field(status, "message"))
if reason ~= nil then
  message = message .. " (" .. reason .. ")"
end
if detail ~= nil then
  message = message .. ": " .. detail
end
if verdict == "Diverged" then
  return {status = "Degraded", message = message}
end
if verdict == "Resumable" then
  return {status = "Suspended", message = message}
end
return {status = "Healthy", message = message}
