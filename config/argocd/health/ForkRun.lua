-- Argo CD health of an agentrewind.io ForkRun (a fork, or a replay-suite regression test).
--   Progressing: no status yet, a spec generation not observed yet (a commit changed the spec, so it
--                runs again), waiting for its session, or its Job running (Reconciling).
--   Degraded:    Stalled: a replay that diverged (a failing regression test turns the app red; the
--                message names the step and the call), a fork that missed its goal or diverged, a Job
--                that failed, an invalid spec.
--   Healthy:     Ready: a replay that passed, a fork that reached its goal or completed.
-- @common
return {status = "Healthy", message = explain(ready)}
