// A real `evicortex serve` on loopback over a throwaway store, with a key for `alice`, one for
// `bob` and an admin key. The binary is $EVICORTEX_BIN (scripts/test-clients sets it); the tests
// fail, never skip, without it.
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

export interface Served {
  url: string;
  alice: string;
  bob: string;
  admin: string;
  stop(): Promise<void>;
}

function bin(): string {
  const found = process.env.EVICORTEX_BIN;
  if (!found) throw new Error("no evicortex binary: set EVICORTEX_BIN");
  return found;
}

function createKey(store: string, ...scope: string[]): string {
  return execFileSync(bin(), ["--store", store, "keys", "create", ...scope], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  }).trim();
}

export async function serve(...args: string[]): Promise<Served> {
  const dir = mkdtempSync(join(tmpdir(), "evicortex-ts-"));
  const store = join(dir, "store");
  const alice = createKey(store, "--namespace", "alice");
  const bob = createKey(store, "--namespace", "bob");
  const admin = createKey(store, "--admin");
  const child: ChildProcess = spawn(bin(), ["--store", store, "serve", "--listen", "127.0.0.1:0", ...args], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines = createInterface({ input: child.stdout! });
  const first = await new Promise<string>((resolve, reject) => {
    lines.once("line", resolve);
    child.once("exit", (code) => reject(new Error(`evicortex serve exited with ${code} before listening`)));
  });
  if (!first.startsWith("listening on ")) {
    child.kill();
    throw new Error(`evicortex serve did not start: ${first}`);
  }
  const url = first.split(" ").at(-1)!;
  return {
    url,
    alice,
    bob,
    admin,
    async stop() {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
