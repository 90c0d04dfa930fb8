-- Argo CD health of a Flexsite Site, Asset or Enrolment (flexsite.io), read from the kstatus
-- conditions its controller writes (docs/platform.md, "Status conditions"): Ready, Reconciling and
-- Stalled, each stamped with the generation it was computed from, and status.observedGeneration.
--   Progressing  the controller has not observed this generation yet (a new object reads
--                observedGeneration -1), or Reconciling=True: work is pending, nobody needs to act
--   Degraded     Stalled=True: it cannot progress until someone changes something
--   Healthy      Ready=True for this generation
-- Argo CD runs health scripts without Lua's string library, so this uses none.
local hs = {}
local generation = obj.metadata.generation
local status = obj.status or {}

-- The condition of the given type, if it was computed from this generation.
local function current(type)
  for _, c in ipairs(status.conditions or {}) do
    if c.type == type and (c.observedGeneration == nil or c.observedGeneration == generation) then
      return c
    end
  end
  return nil
end

local function say(c, fallback)
  if c.message ~= nil and c.message ~= "" then
    return c.message
  end
  return c.reason or fallback
end

if generation ~= nil and status.observedGeneration ~= generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to observe generation " .. generation
  return hs
end

local stalled = current("Stalled")
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = say(stalled, "Stalled")
  return hs
end

local reconciling = current("Reconciling")
if reconciling ~= nil and reconciling.status == "True" then
  hs.status = "Progressing"
  hs.message = say(reconciling, "Reconciling")
  return hs
end

local ready = current("Ready")
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = say(ready, "Ready")
  return hs
end

-- Observed, but neither Ready nor a verdict yet: the controllers always pair Ready=False with
-- Reconciling or Stalled, so this is a moment between two writes.
hs.status = "Progressing"
if ready ~= nil then
  hs.message = say(ready, "Not ready")
else
  hs.message = "Waiting for the Ready condition"
end
return hs
