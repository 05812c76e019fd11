-- Argo CD health of an agentrewind.io AgentSession (a recorded agent run).
--   Progressing: no status yet, a spec generation not observed yet, the session being recorded or its
--                verify Job running (Reconciling), or waiting on a store that cannot be reached.
--   Degraded:    Stalled, with its reason: the stored run is corrupt (DigestMismatch, SessionCorrupt),
--                the recording failed, or the spec is invalid.
--   Healthy:     Ready: recorded and verified. The resume verdict is the ResumePlan's to report; it is
--                named in the message.
-- @common
local message = explain(ready)
local resumeVerdict = text(field(status, "resumeVerdict"))
if resumeVerdict ~= nil then
  message = message .. " (resume verdict " .. resumeVerdict .. ")"
end
return {status = "Healthy", message = message}
