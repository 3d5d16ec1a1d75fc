#!/usr/bin/env node
// Token-count helper for the dataset goldens, on Hugging Face's Rust
// tokenizers (npm binding): an implementation independent of perflab's.
//
//   node tok.js vocab                 -> prints tokenizer.vocab_size (no added tokens)
//   node tok.js sharegpt SAMPLE.json  -> per entry: id, turns, prompt/completion token counts
//   node tok.js random DRAWS.json     -> vLLM v0.11.0 random-dataset prompts from numpy draws
'use strict';
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const { Tokenizer } = require('tokenizers');

const shared = path.resolve(__dirname, '..', '..', '..', '..', 'shared');
const tok = Tokenizer.fromFile(path.join(shared, 'data/tokenizers/qwen3/tokenizer.json'));

// HF's tokenizer(text).input_ids: special tokens added (none for Qwen).
async function count(text) {
  return (await tok.encode(text)).getIds().length;
}

function sha(ids) {
  return crypto.createHash('sha256').update(ids.join(',')).digest('hex');
}

async function sharegpt(file) {
  const data = JSON.parse(fs.readFileSync(file, 'utf8'));
  const out = [];
  for (const e of data) {
    const convs = e.conversations;
    const row = { id: e.id, turns: Array.isArray(convs) ? convs.length : -1 };
    if (Array.isArray(convs) && convs.length >= 2) {
      row.prompt_len = await count(convs[0].value);
      row.completion_len = await count(convs[1].value);
    }
    out.push(row);
  }
  return out;
}

// generate_token_sequence as of vLLM v0.11.0: ids run on from
// (offset + i) mod vocab, decode, encode without special tokens, truncate
// to prefix+input, decode again; prompt_len is the truncated length.
async function random(file) {
  const spec = JSON.parse(fs.readFileSync(file, 'utf8'));
  for (const c of spec.cases) {
    const V = spec.vocab_size;
    c.requests = [];
    for (let i = 0; i < c.input_lens.length; i++) {
      const seq = c.prefix.slice();
      for (let j = 0; j < c.input_lens[i]; j++) seq.push((c.offsets[i] + i + j) % V);
      const text = await tok.decode(seq, false);
      let ids = (await tok.encode(text, null, { addSpecialTokens: false })).getIds();
      ids = ids.slice(0, c.prefix.length + c.input_lens[i]);
      const prompt = await tok.decode(ids, false);
      c.requests.push({
        prompt_len: ids.length,
        output_len: c.output_lens[i],
        ids_sha256: sha(ids),
        prompt_sha256: crypto.createHash('sha256').update(prompt, 'utf8').digest('hex'),
        head: ids.slice(0, 4),
      });
    }
    delete c.offsets;
    delete c.input_lens;
    delete c.output_lens;
  }
  return spec;
}

async function main() {
  const [cmd, file] = process.argv.slice(2);
  let out;
  if (cmd === 'vocab') out = tok.getVocabSize(false);
  else if (cmd === 'sharegpt') out = await sharegpt(file);
  else if (cmd === 'random') out = await random(file);
  else throw new Error('usage: tok.js vocab | sharegpt FILE | random FILE');
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => { console.error(e); process.exit(1); });
