#!/bin/sh
# tokenizer.hf_json: trains a 1,000-token tokenizer on Emma (tlm writes its
# tokenizer.json), then checks it, GPT-2's and Llama 3's tokenizer.json
# against @huggingface/tokenizers (hf_json_parity.mjs).
# Usage: hf_json.sh TLM_RUN NODE REFDIR WORKDIR DATADIR
set -eu
tlm=$1 node=$2 ref=$3 work=$4 data=$5
mkdir -p "$work"
"$tlm" tokenizer train --vocab 1000 "$data/austen/emma.txt" -o "$work/trained.json" 2>/dev/null
exec "$node" "$(dirname "$0")/hf_json_parity.mjs" "$tlm" "$work" "$ref/gpt2.json" "$ref/llama3.json" \
  "$work/trained.json" -- "$data/austen/persuasion.txt" "$data/kjv/kjv.txt"
