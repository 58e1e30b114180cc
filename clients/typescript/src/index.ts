/**
 * A typed client of the EviCortex HTTP API (`evicortex serve`), with no runtime dependencies:
 * the platform's `fetch`. The request and response types are generated from the server's
 * OpenAPI document (`src/openapi.ts`, `npm run generate`; the tests fail when it no longer
 * matches the server's `GET /openapi.json`).
 *
 * ```ts
 * import { Client } from "@evicortex/client";
 * const memory = new Client("http://127.0.0.1:8787", process.env.EVICORTEX_KEY!);
 * await memory.append("alice", [{ session: "s1", turn: 0, role: "user",
 *   text: "My dog is called Biscuit.", time: "2024-05-02T10:00:00+01:00" }]);
 * const context = await memory.compile("alice", "What is my dog called?",
 *   { budget: 200, readerTokenizer: "o200k_base" });
 * console.log(context.text, context.items.map((i) => i.citation));
 * ```
 */

import type { components } from "./openapi.js";

type Schemas = components["schemas"];

/** One conversation turn to append (the ingest format's fields, without the namespace). */
export type TurnInput = Omit<Schemas["TurnInput"], "time"> & { time: string | Date };
export type AppendResponse = Schemas["AppendResponse"];
export type CompiledContext = Schemas["CompiledContext"];
export type ContextItem = Schemas["ContextItem"];
export type ExcludedCandidate = Schemas["ExcludedCandidate"];
export type AnswerResponse = Schemas["AnswerResponse"];
export type EraseResponse = Schemas["EraseResponse"];
export type VerifyResponse = Schemas["VerifyResponse"];
export type NamespaceStats = Schemas["NamespaceStatsResponse"];
export type ExportedTurn = Schemas["ExportedTurn"];
export type NamespacesResponse = Schemas["NamespacesResponse"];
export type SessionsResponse = Schemas["SessionsResponse"];
export type HealthResponse = Schemas["HealthResponse"];
export type ErrorBody = Schemas["ErrorBody"];

/** Compile settings over the server's defaults (`{ rrf_k: 5.0, lexical: { top_n: 20 } }`),
 * the configuration's own field names; an unknown one is refused naming it. */
export type CompileSettings = Record<string, unknown>;

export interface CompileOptions {
  /** Hard budget in reader tokens for the whole context block. */
  budget: number;
  /** The reader's tokenizer: `o200k_base` or `cl100k_base`. */
  readerTokenizer: string;
  /** Only evidence said at or before this time (RFC 3339 with an offset, or a Date). */
  asOf?: string | Date;
  /** Compile settings. */
  options?: CompileSettings;
}

export interface AnswerOptions {
  /** Hard budget of the context in the server reader's own tokens. */
  budget: number;
  /** Only evidence said at or before this time. */
  asOf?: string | Date;
  /** Most tokens the reader may generate (1 to 512; the server's default 64). */
  maxNewTokens?: number;
  /** Compile settings. */
  options?: CompileSettings;
}

/** Exactly one erasure target. */
export type EraseTarget = { session: string } | { record: number } | { all: true };

export interface ClientOptions {
  /** Milliseconds before a request is abandoned (a `TransportError`); default 300000. */
  timeoutMs?: number;
  /** The fetch to use; default the global one. */
  fetch?: typeof fetch;
}

/** Any EviCortex failure: `field` names the offending input where one is to blame,
 * `status` is the HTTP status (absent for a transport failure). */
export class EvicortexError extends Error {
  readonly field: string | null;
  readonly status: number | undefined;
  constructor(message: string, field: string | null = null, status?: number) {
    super(message);
    this.name = new.target.name;
    this.field = field;
    this.status = status;
  }
}
/** The input is invalid (400, 413, 422); nothing changed. */
export class BadInputError extends EvicortexError {}
/** The target matches nothing in the namespace (404). */
export class NotFoundError extends BadInputError {}
/** The input conflicts with what is stored (409). */
export class ConflictError extends BadInputError {}
/** The key is missing or invalid (401) or does not reach this namespace or operation (403). */
export class AuthError extends EvicortexError {}
/** The server cannot do this now (503: no reader, writes refused since a disk failure; 429 or
 * 503 with Retry-After: its answer or compile queue is full or was too slow, and the message
 * says when to retry). */
export class UnavailableError extends EvicortexError {}
/** Stored data failed an integrity check. */
export class IntegrityError extends EvicortexError {}
/** The disk or the storage engine failed (500, 507). */
export class StorageError extends EvicortexError {}
/** The server could not be reached, or its answer was not the API's. */
export class TransportError extends EvicortexError {}

/** The error class of an error response. */
export function errorFor(status: number, message: string, field: string | null): EvicortexError {
  if (status === 401 || status === 403) return new AuthError(message, field, status);
  if (status === 404) return new NotFoundError(message, field, status);
  if (status === 409) return new ConflictError(message, field, status);
  if (status === 429) return new UnavailableError(message, field, status);
  if (status >= 400 && status < 500) return new BadInputError(message, field, status);
  if (status === 503) return new UnavailableError(message, field, status);
  if (message.startsWith("integrity failure")) return new IntegrityError(message, field, status);
  return new StorageError(message, field, status);
}

/** A client of `evicortex serve` at `url`, sending `key` as `Authorization: Bearer <key>`. A
 * namespace key reaches its own namespace only; `verify` needs an admin key. */
export class Client {
  readonly url: string;
  readonly #key: string;
  readonly #timeoutMs: number;
  readonly #fetch: typeof fetch;

  constructor(url: string, key: string, options: ClientOptions = {}) {
    this.url = url.replace(/\/+$/, "");
    this.#key = key;
    this.#timeoutMs = options.timeoutMs ?? 300_000;
    this.#fetch = options.fetch ?? globalThis.fetch;
  }

  /** Stores `turns` in `namespace` as one atomic, durable batch (idempotent per turn). */
  async append(namespace: string, turns: readonly TurnInput[]): Promise<AppendResponse> {
    const body = { turns: turns.map((t) => ({ ...t, time: timeText(t.time, "time") })) };
    return this.#request("POST", `/v1/namespaces/${segment(namespace)}/turns`, body);
  }

  /** The turns of `namespace` that support `query`, cited and packed into `budget` tokens of
   * `readerTokenizer`, or an abstention. */
  async compile(namespace: string, query: string, options: CompileOptions): Promise<CompiledContext> {
    const body: Record<string, unknown> = {
      query,
      budget: options.budget,
      reader_tokenizer: options.readerTokenizer,
    };
    if (options.asOf !== undefined) body.as_of = timeText(options.asOf, "as_of");
    if (options.options !== undefined) body.options = options.options;
    return this.#request("POST", `/v1/namespaces/${segment(namespace)}/compile`, body);
  }

  /** The server's reader (`evicortex serve --reader NAME`) answers `query` from a context
   * compiled in its own tokens, citing records, or abstains; `UnavailableError` without one. */
  async answer(namespace: string, query: string, options: AnswerOptions): Promise<AnswerResponse> {
    const body: Record<string, unknown> = { query, budget: options.budget };
    if (options.asOf !== undefined) body.as_of = timeText(options.asOf, "as_of");
    if (options.maxNewTokens !== undefined) body.max_new_tokens = options.maxNewTokens;
    if (options.options !== undefined) body.options = options.options;
    return this.#request("POST", `/v1/namespaces/${segment(namespace)}/answer`, body);
  }

  /** Forgets one session, one record, or the whole namespace, everywhere. */
  async erase(namespace: string, target: EraseTarget): Promise<EraseResponse> {
    const given = (["session", "record", "all"] as const).filter((k) => k in target);
    if (given.length !== 1) {
      throw new BadInputError("target: give exactly one of session, record or all", "target");
    }
    return this.#request("POST", `/v1/namespaces/${segment(namespace)}/erase`, target);
  }

  /** Checks every record's digest and chain link (admin keys only). */
  async verify(): Promise<VerifyResponse> {
    return this.#request("GET", "/v1/verify");
  }

  /** Counts of the namespace's live turns. */
  async stats(namespace: string): Promise<NamespaceStats> {
    return this.#request("GET", `/v1/namespaces/${segment(namespace)}/stats`);
  }

  /** The live turns of `namespace`, in ledger order, texts byte for byte; without a namespace,
   * those of the one namespace the key reads (a key reading several must name one). */
  async export(namespace?: string): Promise<ExportedTurn[]> {
    const target = namespace ?? (await this.#onlyNamespace());
    if (target === null) return [];
    const body: Schemas["ExportResponse"] = await this.#request(
      "GET",
      `/v1/namespaces/${segment(target)}/export`,
    );
    return body.turns;
  }

  /** The one namespace the key reads (null when none); a key reading several must name one. */
  async #onlyNamespace(): Promise<string | null> {
    const { namespaces } = await this.namespaces();
    const [only] = namespaces;
    if (only === undefined) return null;
    if (namespaces.length > 1) {
      const message = `namespace: this key reads ${namespaces.length} namespaces; name the one to export`;
      throw new BadInputError(message, "namespace");
    }
    return only;
  }

  /** The namespaces the key may read. */
  async namespaces(): Promise<NamespacesResponse> {
    return this.#request("GET", "/v1/namespaces");
  }

  /** The sessions of `namespace` with their turn counts and time spans. */
  async sessions(namespace: string): Promise<SessionsResponse> {
    return this.#request("GET", `/v1/namespaces/${segment(namespace)}/sessions`);
  }

  /** Liveness (no key needed). */
  async health(): Promise<HealthResponse> {
    return this.#request("GET", "/healthz");
  }

  async #request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.#key}` };
    if (body !== undefined) headers["content-type"] = "application/json";
    let response: Response;
    let text: string;
    try {
      response = await this.#fetch(this.url + path, {
        method,
        headers,
        body: body === undefined ? null : JSON.stringify(body),
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
      text = await response.text();
    } catch (e) {
      throw new TransportError(`${method} ${this.url}${path}: ${(e as Error).message}`);
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      if (!response.ok) throw errorFor(response.status, `HTTP ${response.status}: ${text.slice(0, 200)}`, null);
      throw new TransportError(`${path}: the answer is not JSON`);
    }
    if (!response.ok) {
      const error = value as Partial<ErrorBody>;
      const message = typeof error.error === "string" ? error.error : `HTTP ${response.status}`;
      throw errorFor(response.status, message, typeof error.field === "string" ? error.field : null);
    }
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      throw new TransportError(`${path}: the answer is not a JSON object`);
    }
    return value as T;
  }
}

function segment(namespace: string): string {
  return encodeURIComponent(namespace);
}

function timeText(value: string | Date, field: string): string {
  if (typeof value === "string") return value;
  if (value instanceof Date && !Number.isNaN(value.getTime())) return value.toISOString();
  throw new BadInputError(`${field}: expected an RFC 3339 string or a valid Date`, field);
}
