-- The Ready, Reconciling and Stalled conditions and observedGeneration, read the way kstatus reads
-- them. Argo CD runs a custom check without Lua's string library, so only base functions are used.
-- Every field is read for its type, so a status of the wrong shape (a hand edit, another version of
-- the operator, a foreign writer) counts as absent and the check still answers: never a Lua error.
local function field(t, key)
  if type(t) == "table" then
    return t[key]
  end
  return nil
end

local function text(v)
  if type(v) == "string" then
    return v
  end
  if type(v) == "number" or type(v) == "boolean" then
    return tostring(v)
  end
  return nil
end

local function number(v)
  if type(v) == "number" then
    return v
  end
  if type(v) == "string" then
    return tonumber(v)
  end
  return nil
end

local status = field(obj, "status")

local function condition(kind)
  local conditions = field(status, "conditions")
  if type(conditions) ~= "table" then
    return nil
  end
  for _, c in ipairs(conditions) do
    if type(c) == "table" and c.type == kind then
      return c
    end
  end
  return nil
end

local function explain(c)
  local reason, message = text(c.reason), text(c.message)
  if reason == nil or reason == "" then
    reason = c.type
  end
  if message == nil or message == "" or message == reason then
    return reason
  end
  return reason .. ": " .. message
end

local ready, reconciling, stalled = condition("Ready"), condition("Reconciling"), condition("Stalled")
if ready == nil and reconciling == nil and stalled == nil then
  return {status = "Progressing", message = "Waiting for the operator to report status"}
end
local generation = number(field(field(obj, "metadata"), "generation"))
local observed = number(field(status, "observedGeneration"))
if observed == nil and ready ~= nil then
  observed = number(ready.observedGeneration)
end
if generation ~= nil and observed ~= nil and observed < generation then
  return {status = "Progressing", message = "Generation " .. text(generation) .. " is not observed yet (status is of generation " .. text(observed) .. ")"}
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
