// The client against a real `evicortex serve` on loopback (BM25 retrieval and the smallest
// pinned reader, so that answer reads for real): every operation, its options and its errors.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";

import {
  AuthError,
  BadInputError,
  Client,
  NotFoundError,
  TransportError,
  UnavailableError,
  type TurnInput,
} from "../src/index.js";
import { serve, type Served } from "./server.js";

const TEST_READER = "smollm2-135m-instruct-q4_1";

const turns: TurnInput[] = [
  { session: "s1", turn: 0, role: "user", text: "My dog is called Biscuit.", time: "2024-05-02T10:00:00+01:00" },
  { session: "s1", turn: 1, role: "assistant", text: "Biscuit is a lovely name.", time: "2024-05-02T10:00:05+01:00" },
  {
    session: "s2",
    turn: 0,
    role: "user",
    speaker: "Alice",
    text: "I moved to Lisbon for work in June.",
    time: new Date("2024-06-10T09:00:00Z"),
  },
];

describe("Client against evicortex serve", () => {
  let server: Served;
  let alice: Client;
  before(async () => {
    server = await serve("--lexical-only", "--reader", TEST_READER);
    alice = new Client(server.url, server.alice);
    const receipt = await alice.append("alice", turns);
    assert.equal(receipt.appended, 3);
  });
  after(async () => server.stop());

  test("append is idempotent per turn and refuses a conflicting turn naming it", async () => {
    const again = await alice.append("alice", turns.slice(0, 1));
    assert.deepEqual([again.appended, again.already_present], [0, 1]);
    await assert.rejects(
      alice.append("alice", [{ ...turns[0]!, text: "My dog is called Rex." }]),
      (e: unknown) => e instanceof BadInputError && e.status === 409 && e.field === "turns[0].text",
    );
    await assert.rejects(
      alice.append("alice", [{ ...turns[0]!, turn: 7, time: "2024-05-02T10:00:00" }]),
      (e: unknown) => e instanceof BadInputError && e.field === "turns[0].time",
    );
  });

  test("compile cites the turn, with every option", async () => {
    const context = await alice.compile("alice", "What is my dog called?", {
      budget: 200,
      readerTokenizer: "o200k_base",
      options: { rrf_k: 10.0, lexical: { top_n: 20 } },
    });
    assert.equal(context.abstain, false);
    assert.ok(context.tokens_used <= 200);
    const item = context.items.find((i) => i.text.includes("Biscuit"));
    assert.ok(item, context.text);
    assert.ok(context.text.includes(`[${item.citation}]`), context.text);
    assert.equal(item.session, "s1");
    assert.ok(item.lexical && item.lexical.rank >= 1);
    assert.equal((context.config as { rrf_k: number }).rrf_k, 10);

    const before = await alice.compile("alice", "Where did I move for work?", {
      budget: 200,
      readerTokenizer: "cl100k_base",
      asOf: new Date("2024-06-01T00:00:00Z"),
    });
    assert.ok(!before.items.some((i) => i.text.includes("Lisbon")), "as_of leaves later turns out");
    assert.equal(before.reader_tokenizer, "cl100k_base");
    const later = await alice.compile("alice", "Where did I move for work?", {
      budget: 200,
      readerTokenizer: "cl100k_base",
      asOf: "2024-07-01T00:00:00+02:00",
    });
    const lisbon = later.items.find((i) => i.text.includes("Lisbon"));
    assert.equal(lisbon?.speaker, "Alice");

    await assert.rejects(
      alice.compile("alice", "q", { budget: 100, readerTokenizer: "o200k_base", options: { rrf_kk: 1 } }),
      (e: unknown) => e instanceof BadInputError && e.status === 422 && e.field === "options.rrf_kk",
    );
  });

  test("answer reads the context with the server's reader and cites records", async () => {
    const answer = await alice.answer("alice", "What is my dog called?", { budget: 300, maxNewTokens: 8 });
    assert.ok(answer.context.text.includes("Biscuit"), answer.context.text);
    assert.ok(answer.answer, JSON.stringify(answer));
    assert.equal((answer.answer.reader as { name: string }).name, TEST_READER);
    assert.ok(answer.answer.generated_tokens <= 8);
    await assert.rejects(
      alice.answer("alice", "q", { budget: 100, maxNewTokens: 0 }),
      (e: unknown) => e instanceof BadInputError && e.field === "max_new_tokens",
    );
  });

  test("stats, export and namespaces", async () => {
    const stats = await alice.stats("alice");
    assert.deepEqual([stats.turns, stats.sessions], [3, 2]);
    const exported = await alice.export();
    assert.deepEqual(exported.map((t) => t.text), turns.map((t) => t.text));
    assert.equal(exported[2]?.time, "2024-06-10T09:00:00Z"); // a Date is sent as UTC
    const admin = new Client(server.url, server.admin);
    await admin.append("carol", [{ session: "c", turn: 0, role: "user", text: "hi", time: "2024-01-01T00:00:00Z" }]);
    await assert.rejects(admin.export(), (e: unknown) => e instanceof BadInputError && e.field === "namespace");
    assert.equal((await admin.export("carol")).length, 1);
  });

  test("keys: 401 without a valid key, 403 for another namespace or an admin operation", async () => {
    await assert.rejects(
      new Client(server.url, "evk_wrong").stats("alice"),
      (e: unknown) => e instanceof AuthError && e.status === 401,
    );
    await assert.rejects(
      new Client(server.url, server.bob).compile("alice", "dog", { budget: 100, readerTokenizer: "o200k_base" }),
      (e: unknown) => e instanceof AuthError && e.status === 403,
    );
    await assert.rejects(alice.verify(), (e: unknown) => e instanceof AuthError && e.status === 403);
    const report = await new Client(server.url, server.admin).verify();
    assert.equal(report.ok, true);
    assert.ok(report.turns >= 3);
  });

  test("erase a record, a session, everything; an unknown session is a NotFoundError", async () => {
    const receipt = await alice.append("alice", [
      { session: "s3", turn: 0, role: "user", text: "erase me", time: "2024-07-01T00:00:00Z" },
      { session: "s3", turn: 1, role: "user", text: "and me", time: "2024-07-01T00:00:01Z" },
    ]);
    const [first, second] = receipt.turns;
    const one = await alice.erase("alice", { record: first!.id });
    assert.deepEqual(one.erased, [first!.id]);
    const session = await alice.erase("alice", { session: "s3" });
    assert.deepEqual(session.erased, [second!.id]);
    await assert.rejects(alice.erase("alice", { session: "nope" }), (e: unknown) => e instanceof NotFoundError);
    await assert.rejects(
      alice.erase("alice", { session: "s1", all: true } as never),
      (e: unknown) => e instanceof BadInputError && e.field === "target",
    );
    const all = await alice.erase("alice", { all: true });
    assert.equal(all.erased.length, 3);
    assert.equal((await alice.stats("alice")).turns, 0);
  });

  test("the generated types match the server's OpenAPI document", () => {
    const script = fileURLToPath(new URL("../../scripts/generate.mjs", import.meta.url));
    const out = execFileSync(process.execPath, [script, "--check", `${server.url}/openapi.json`], {
      encoding: "utf8",
    });
    assert.match(out, /matches/);
  });
});

test("a server without a reader answers 503 as an UnavailableError", async () => {
  const server = await serve("--lexical-only");
  try {
    const client = new Client(server.url, server.alice);
    await assert.rejects(
      client.answer("alice", "q", { budget: 100 }),
      (e: unknown) => e instanceof UnavailableError && e.status === 503,
    );
  } finally {
    await server.stop();
  }
});

test("an unreachable server is a TransportError", async () => {
  const client = new Client("http://127.0.0.1:9", "evk_x", { timeoutMs: 5000 });
  await assert.rejects(client.stats("alice"), (e: unknown) => e instanceof TransportError);
});

test("the example in examples/typescript runs against a server", async () => {
  const server = await serve("--lexical-only", "--reader", TEST_READER);
  try {
    const example = fileURLToPath(new URL("../../../../examples/typescript/remember_and_recall.mjs", import.meta.url));
    const out = execFileSync(process.execPath, [example], {
      encoding: "utf8",
      env: { ...process.env, EVICORTEX_URL: server.url, EVICORTEX_KEY: server.alice },
    });
    assert.match(out, /stored records \d+, \d+ \(2 new\)/);
    assert.match(out, /My dog is called Biscuit and she is a beagle\./);
    assert.match(out, /^answer: /m);
  } finally {
    await server.stop();
  }
});
