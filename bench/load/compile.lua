-- wrk script: every request compiles context for one of a fixed set of questions.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "common.lua")
local counter = 0

function init(args)
  post_to_namespace("compile")
end

local questions = { "Where did I move for my new job?", "What instrument am I learning?",
  "When is the trip to Kyoto?", "How is the marathon training going?", "What did the vet say about the cat?" }

function request()
  counter = counter + 1
  local q = questions[(counter % #questions) + 1]
  local body = string.format('{"query":"%s","budget":512,"reader_tokenizer":"o200k_base"}', q)
  return wrk.format(nil, nil, nil, body)
end
