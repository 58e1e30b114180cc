-- wrk script: the anchor, GET /healthz (HTTP and routing overhead only, no store access).
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "common.lua")
