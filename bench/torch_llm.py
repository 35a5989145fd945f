#!/usr/bin/env python3
"""torch_llm.py: the PyTorch side of `nuvec bench llm` on the same GPU: a fair Llama decode loop of
the same shape (the way gpt-fast does it), and optionally Hugging Face `generate` as the everyday
baseline. Needs torch with CUDA (and transformers for --hf).

The fair loop: random F16 weights of the named shape (llama-7b: dim 4096, 32 layers, 32 heads,
32 KV heads, FFN 11008, vocab 32000; llama-8b: 8 KV heads, FFN 14336, vocab 128256, RoPE theta
500000; tiny: dim 64, 4 layers, head_dim 16, vocab 512), a static KV cache of prompt + new
tokens, the prompt in one forward (F.scaled_dot_product_attention, causal), then one token a step
(greedy argmax on the GPU) with the whole step captured once as a CUDA graph and replayed with the
position as a tensor the graph reads; the step attends over the whole static cache with a mask
(as gpt-fast does). Reports prompt tokens/s, decode tokens/s, and decode's weight bytes read per
second. --hf: transformers' LlamaForCausalLM of the same config (random init on the GPU, F16,
eager attention) and `generate` (greedy, a fixed number of new tokens).
"""
import argparse
import json
import math
import sys
import time

SHAPES = {
    "llama-7b": dict(dim=4096, layers=32, heads=32, kv_heads=32, ffn=11008, vocab=32000, theta=10000.0),
    "llama-8b": dict(dim=4096, layers=32, heads=32, kv_heads=8, ffn=14336, vocab=128256, theta=500000.0),
    "tiny": dict(dim=64, layers=4, heads=4, kv_heads=4, ffn=172, vocab=512, theta=10000.0),
}


def fair_loop(torch, F, shape, prompt, new, dev):
    s = SHAPES[shape]
    dim, L, H, KVH, ffn, V = s["dim"], s["layers"], s["heads"], s["kv_heads"], s["ffn"], s["vocab"]
    hd = dim // H
    dt = torch.float16
    g = torch.Generator(device=dev).manual_seed(0)

    def w(*shape):
        return (torch.randn(*shape, device=dev, dtype=dt, generator=g) * 0.02)

    layers = []
    for _ in range(L):
        layers.append(dict(wq=w(H * hd, dim), wk=w(KVH * hd, dim), wv=w(KVH * hd, dim), wo=w(dim, H * hd),
                           w1=w(ffn, dim), w3=w(ffn, dim), w2=w(dim, ffn),
                           n1=torch.ones(dim, device=dev, dtype=dt), n2=torch.ones(dim, device=dev, dtype=dt)))
    emb, out, nf = w(V, dim), w(V, dim), torch.ones(dim, device=dev, dtype=dt)
    weight_bytes = sum(t.numel() * t.element_size() for l in layers for t in l.values()) + out.numel() * 2 + dim * 2
    T = prompt + new
    kc = torch.zeros(L, 1, KVH, T, hd, device=dev, dtype=dt)
    vc = torch.zeros(L, 1, KVH, T, hd, device=dev, dtype=dt)
    inv = 1.0 / (s["theta"] ** (torch.arange(0, hd, 2, device=dev, dtype=torch.float32) / hd))
    ang = torch.outer(torch.arange(T, device=dev, dtype=torch.float32), inv)
    cos, sin = torch.cos(ang).to(dt), torch.sin(ang).to(dt)

    def rms(x, wt):
        return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5)).to(dt) * wt

    def rope(x, pos):  # x [1, heads, n, hd], rotate-half layout
        c, s_ = cos[pos][None, None], sin[pos][None, None]
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        c, s_ = c[..., : hd // 2], s_[..., : hd // 2]
        return torch.cat([x1 * c - x2 * s_, x2 * c + x1 * s_], dim=-1)

    def forward(tokens, pos, mask):  # tokens [n], pos [n] (positions), mask [n, T] bool or None (causal prefix)
        n = tokens.shape[0]
        x = emb[tokens][None]
        for i, l in enumerate(layers):
            h = rms(x, l["n1"])
            q = F.linear(h, l["wq"]).view(1, n, H, hd).transpose(1, 2)
            k = F.linear(h, l["wk"]).view(1, n, KVH, hd).transpose(1, 2)
            v = F.linear(h, l["wv"]).view(1, n, KVH, hd).transpose(1, 2)
            q, k = rope(q, pos), rope(k, pos)
            kc[i].index_copy_(2, pos, k)
            vc[i].index_copy_(2, pos, v)
            if mask is None:
                a = F.scaled_dot_product_attention(q, kc[i][:, :, :n], vc[i][:, :, :n], is_causal=True,
                                                   enable_gqa=KVH != H)
            else:
                a = F.scaled_dot_product_attention(q, kc[i], vc[i], attn_mask=mask[None, None], enable_gqa=KVH != H)
            x = x + F.linear(a.transpose(1, 2).reshape(1, n, H * hd), l["wo"])
            h = rms(x, l["n2"])
            x = x + F.linear(F.silu(F.linear(h, l["w1"])) * F.linear(h, l["w3"]), l["w2"])
        return F.linear(rms(x[:, -1], nf), out)

    with torch.no_grad():
        ptoks = torch.randint(0, V, (prompt,), device=dev, generator=g)
        ppos = torch.arange(prompt, device=dev)
        forward(ptoks, ppos, None)  # warm-up
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        logits = forward(ptoks, ppos, None)
        torch.cuda.synchronize()
        t_prompt = time.perf_counter() - t0
        # Decode: the step as a CUDA graph over static tensors (token, position, mask).
        tok = torch.argmax(logits, -1).view(1)
        pos = torch.tensor([prompt], device=dev)
        mask = torch.arange(T, device=dev)[None] <= pos[:, None]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                forward(tok, pos, mask)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            glogits = forward(tok, pos, mask)
            gnext = torch.argmax(glogits, -1).view(1)
        ids = []
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for step in range(new):
            pos.fill_(prompt + step) if step == 0 else pos.add_(1)
            torch.le(torch.arange(T, device=dev)[None], pos[:, None], out=mask)
            graph.replay()
            tok.copy_(gnext)
            ids.append(tok)
        torch.cuda.synchronize()
        t_decode = time.perf_counter() - t0
    return dict(prompt_tokens_per_s=prompt / t_prompt, decode_tokens_per_s=new / t_decode,
                weight_bytes=weight_bytes, weights_read_per_s=weight_bytes * new / t_decode)


def hf_generate(torch, shape, prompt, new, dev):
    from transformers import LlamaConfig, LlamaForCausalLM
    s = SHAPES[shape]
    cfg = LlamaConfig(hidden_size=s["dim"], intermediate_size=s["ffn"], num_hidden_layers=s["layers"],
                      num_attention_heads=s["heads"], num_key_value_heads=s["kv_heads"], vocab_size=s["vocab"],
                      rope_theta=s["theta"], max_position_embeddings=prompt + new + 8, attn_implementation="eager")
    torch.manual_seed(0)
    with torch.device(dev):
        model = LlamaForCausalLM(cfg).to(torch.float16).eval()
    ids = torch.randint(0, s["vocab"], (1, prompt), device=dev)
    with torch.no_grad():
        model.generate(ids, max_new_tokens=2, min_new_tokens=2, do_sample=False)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        model.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
    return dict(tokens_per_s=new / dt)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="llama-7b", choices=sorted(SHAPES))
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--hf", action="store_true", help="also Hugging Face generate")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print(f"torch_llm: no torch: {e}", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("torch_llm: no CUDA device", file=sys.stderr)
        return 1
    dev = torch.device("cuda")
    r = dict(shape=args.shape, prompt=args.p, new=args.n, device=torch.cuda.get_device_name(0), torch=torch.__version__)
    r["fair"] = fair_loop(torch, F, args.shape, args.p, args.n, dev)
    torch.cuda.empty_cache()
    if args.hf:
        try:
            r["hf_generate"] = hf_generate(torch, args.shape, args.p, args.n, dev)
        except Exception as e:  # transformers missing or failing: say so, keep the fair loop's numbers
            r["hf_generate"] = dict(error=str(e))
    if args.json:
        print(json.dumps(r))
        return 0
    f = r["fair"]
    print(f"torch_llm on {r['device']} (torch {r['torch']}): {args.shape} F16, prompt {args.p}, {args.n} new tokens")
    print(f"fair loop (static KV cache, CUDA graph a step): prompt {f['prompt_tokens_per_s']:.0f} tokens/s, decode "
          f"{f['decode_tokens_per_s']:.1f} tokens/s, weights {f['weights_read_per_s'] / 1e12:.2f} TB/s")
    if "hf_generate" in r:
        h = r["hf_generate"]
        print(f"HF generate (eager, F16): {h['tokens_per_s']:.1f} tokens/s" if "tokens_per_s" in h
              else f"HF generate: failed: {h['error']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
