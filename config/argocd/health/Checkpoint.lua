-- Argo CD health of an agentrewind.io Checkpoint (an anchor minted by the recorder, with or without a
-- workspace snapshot).
--   Progressing: no status yet, a spec generation not observed yet, waiting for its session to be
--                verified, or its snapshot Job running (Reconciling).
--   Degraded:    Stalled: the snapshot failed, the anchor does not match the verified session, or the
--                session failed verification.
--   Healthy:     Ready: an anchor checked against the session (AnchorOnly) or a stored snapshot.
-- @common
return {status = "Healthy", message = explain(ready)}
