// The TypeScript client against `evicortex serve`: remember two turns, recall the evidence for
// a question within a budget, and ask the server's reader when it has one.
//
//   (cd clients/typescript && npm ci && npm run build)
//   evicortex --store ./evicortex-data keys create --namespace alice     # prints evk_...
//   evicortex --store ./evicortex-data serve --reader smollm2-135m-instruct-q4_1 &
//   EVICORTEX_URL=http://127.0.0.1:8787 EVICORTEX_KEY=evk_... node examples/typescript/remember_and_recall.mjs
import { Client, UnavailableError } from "../../clients/typescript/dist/src/index.js";

const memory = new Client(process.env.EVICORTEX_URL ?? "http://127.0.0.1:8787", process.env.EVICORTEX_KEY ?? "");
const namespace = process.env.EVICORTEX_NAMESPACE ?? "alice";

const receipt = await memory.append(namespace, [
  { session: "walk", turn: 0, role: "user", text: "My dog is called Biscuit and she is a beagle.", time: new Date() },
  { session: "walk", turn: 1, role: "assistant", text: "A beagle called Biscuit, noted.", time: new Date() },
]);
console.log(`stored records ${receipt.turns.map((t) => t.id).join(", ")} (${receipt.appended} new)`);

const context = await memory.compile(namespace, "What breed is my dog?", { budget: 300, readerTokenizer: "o200k_base" });
console.log(`${context.tokens_used}/${context.budget} tokens, abstain: ${context.abstain}`);
console.log(context.text);

try {
  const answer = await memory.answer(namespace, "What breed is my dog?", { budget: 300, maxNewTokens: 32 });
  console.log(`answer: ${answer.answer?.text ?? "(abstained)"} cites ${answer.answer?.citations ?? []}`);
} catch (e) {
  if (!(e instanceof UnavailableError)) throw e;
  console.log("this server has no reader (start it with --reader NAME)");
}
