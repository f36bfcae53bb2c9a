// llama.cpp (node-llama-cpp, its prebuilt CPU binary) against tlm on GGUF
// files tlm-run export wrote for one trained model:
//
//   node parity.mjs TLM_RUN DUMP_LOGPROBS WORK NAME TEXT
//
// WORK holds NAME.so, ck_NAME/checkpoint.safetensors and NAME-{f32,f16,q8_0}.gguf;
// TEXT is held-out text (not trained on).
// - the vocabulary: llama.cpp tokenizes texts into their bytes and back;
// (llama.cpp with an f32 KV cache and without flash attention)
// - f32: greedy generation of 100 bytes from each prompt equals
//   `tlm-run sample --temperature 0`; the log-probabilities of every byte
//   after each position of a 256-byte window agree within 1e-4 (those above
//   e^-12; below, llama.cpp's float probabilities lose digits) and the top-1
//   byte agrees at every position;
// - f16 and q8_0: the window's perplexity within 1% and 3% of f32's; the
//   greedy match with tlm is reported.
// Prints the numbers; exit 0 when all hold, 1 otherwise.
import {execFileSync} from "node:child_process";
import {readFileSync} from "node:fs";
import {createRequire} from "node:module";
import path from "node:path";

const [tlmRun, dumpLogprobs, work, name, textPath] = process.argv.slice(2);
const require = createRequire(import.meta.url);
let getLlama, LlamaLogLevel;
try {
    ({getLlama, LlamaLogLevel} = await import(require.resolve("node-llama-cpp")));
} catch (e) {
    console.log(`FAIL: node-llama-cpp is not installed in tests/export (run scripts/setup.sh): ${e.message}`);
    process.exit(1);
}

let failed = false;
const fail = (msg) => { console.log("FAIL:", msg); failed = true; };
const so = path.join(work, `${name}.so`), ckpt = path.join(work, `ck_${name}`);
const ckptFile = path.join(ckpt, "checkpoint.safetensors");
const WINDOW = 256, OFFSET = 20000, LENGTH = 100;
const prompts = ["It is a truth universally acknowledged", "\"My dear Mr. Bennet,\" said his lady",
                 "Emma Woodhouse, handsome, clever, and rich,", "The family of Dashwood", "She was"];

// tlm's side: greedy continuations and the window's log-probabilities.
const tlmGreedy = prompts.map((p) => {
    const out = execFileSync(tlmRun, ["sample", so, "--ckpt", ckpt, "--prompt", p, "--temperature", "0",
                                      "--length", String(LENGTH), "--threads", "1"]);
    return [...out.subarray(Buffer.byteLength(p), Buffer.byteLength(p) + LENGTH)];
});
const text = readFileSync(textPath);
const windowBytes = [...text.subarray(OFFSET, OFFSET + WINDOW)];
const lpFile = path.join(work, `${name}.logprobs`);
execFileSync(dumpLogprobs, [so, ckptFile, textPath, String(OFFSET), String(WINDOW), lpFile]);
const lpBuf = readFileSync(lpFile);
const tlmLp = new Float32Array(lpBuf.buffer, lpBuf.byteOffset, lpBuf.byteLength / 4);
const V = 256;
let tlmNll = 0;
for (let t = 0; t + 1 < WINDOW; t++) tlmNll -= tlmLp[t * V + windowBytes[t + 1]];
const tlmPpl = Math.exp(tlmNll / (WINDOW - 1));

const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const results = {};
for (const type of ["f32", "f16", "q8_0"]) {
    const model = await llama.loadModel({modelPath: path.join(work, `${name}-${type}.gguf`)});
    // The KV cache in f32 and no flash attention: llama.cpp's defaults (an
    // f16 cache; flash attention, whose CPU kernel rounds to f16) move the
    // log-probabilities by up to ~4e-3 (measured, docs/export.md).
    const context = await model.createContext({contextSize: WINDOW, batchSize: WINDOW, threads: 1,
                                               flashAttention: false,
                                               experimentalKvCacheKeyType: "F32",
                                               experimentalKvCacheValueType: "F32"});
    const seq = context.getSequence();
    const r = {type};

    if (type === "f32") {
        for (const s of [prompts.join("\n"), "naïve café — “quoted” \t tabs\r\n", "\x01\x7f~ ÿ"]) {
            const bytes = [...Buffer.from(s, "utf8")];
            const ids = [...model.tokenize(s)];
            if (JSON.stringify(ids) !== JSON.stringify(bytes))
                fail(`llama.cpp tokenizes ${JSON.stringify(s)} as ${ids}, not its bytes ${bytes}`);
            const back = model.detokenize(bytes);
            if (back !== s) fail(`llama.cpp detokenizes the bytes of ${JSON.stringify(s)} as ${JSON.stringify(back)}`);
        }
    }

    // greedy generation from each prompt
    let identical = 0, matched = 0;
    for (let i = 0; i < prompts.length; i++) {
        await seq.clearHistory();
        const out = [];
        for await (const tok of seq.evaluate([...Buffer.from(prompts[i])], {temperature: 0})) {
            out.push(tok);
            if (out.length === LENGTH) break;
        }
        let k = 0;
        while (k < LENGTH && out[k] === tlmGreedy[i][k]) k++;
        matched += k;
        if (k === LENGTH) identical++;
        else if (type === "f32")
            fail(`prompt ${i}: llama.cpp's greedy bytes differ from tlm's at ${k}: ` +
                 `${JSON.stringify(Buffer.from(out).toString("latin1"))} vs ` +
                 `${JSON.stringify(Buffer.from(tlmGreedy[i]).toString("latin1"))}`);
    }
    r.greedy = `${identical}/${prompts.length} identical, ${(100 * matched / (LENGTH * prompts.length)).toFixed(1)}% bytes before the first difference`;

    // the window's log-probabilities
    await seq.clearHistory();
    const outs = await seq.controlledEvaluate(windowBytes.map((tok) => [tok, {generateNext: {probabilities: true}}]));
    let nll = 0, maxDiff = 0, maxTargetDiff = 0, top1 = 0;
    for (let t = 0; t + 1 < WINDOW; t++) {
        const probs = outs[t]?.next?.probabilities;
        if (!probs || probs.size !== V) {
            fail(`${type}: no full distribution at position ${t}`);
            break;
        }
        let best = -1, bestP = -1, tlmBest = 0;
        for (let v = 0; v < V; v++) {
            const p = probs.get(v) ?? 0, ref = tlmLp[t * V + v];
            if (p > bestP) best = v, bestP = p;
            if (ref > tlmLp[t * V + tlmBest]) tlmBest = v;
            if (ref > -12) maxDiff = Math.max(maxDiff, Math.abs(Math.log(p) - ref));
        }
        if (best === tlmBest) top1++;
        const target = windowBytes[t + 1];
        const lp = Math.log(probs.get(target));
        maxTargetDiff = Math.max(maxTargetDiff, Math.abs(lp - tlmLp[t * V + target]));
        nll -= lp;
    }
    r.ppl = Math.exp(nll / (WINDOW - 1));
    r.maxLogprobDiff = maxDiff;
    r.maxTargetLogprobDiff = maxTargetDiff;
    r.top1 = `${top1}/${WINDOW - 1}`;
    results[type] = r;
    await context.dispose();
    await model.dispose();
}

const f32 = results.f32;
if (f32.maxLogprobDiff > 1e-4) fail(`f32: log-probabilities differ from tlm's by up to ${f32.maxLogprobDiff}`);
if (f32.top1 !== `${WINDOW - 1}/${WINDOW - 1}`) fail(`f32: the top-1 byte agrees at only ${f32.top1} positions`);
for (const [type, limit] of [["f16", 0.01], ["q8_0", 0.03]]) {
    const change = Math.abs(results[type].ppl / f32.ppl - 1);
    results[type].pplChange = `${(100 * change).toFixed(3)}%`;
    if (!(change < limit)) fail(`${type}: perplexity ${results[type].ppl} is ${(100 * change).toFixed(2)}% from f32's ${f32.ppl}`);
}
console.log(`${name}: tlm perplexity on the window ${tlmPpl.toFixed(4)}`);
for (const r of Object.values(results))
    console.log(`${name} ${r.type}: greedy ${r.greedy}; perplexity ${r.ppl.toFixed(4)}` +
                `${r.pplChange ? ` (${r.pplChange} from f32)` : ""}; top-1 ${r.top1}; ` +
                `max |dlogp| ${r.maxLogprobDiff.toExponential(2)} (targets ${r.maxTargetLogprobDiff.toExponential(2)})`);
console.log(failed ? "FAIL" : "ok");
process.exit(failed ? 1 : 0);
