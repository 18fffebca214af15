#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes the gradient traces sc_fusion_replay replays (perf/traces/*.trace).

Every trainable tensor of the published architecture, in forward (parameter)
order, with its exact element count and the FLOPs of the layer computation
it is attached to, for one sample (ResNet-50 / VGG-16 at 224x224, BERT-base
at sequence length 128). A layer's FLOPs go on its weight; a bias or norm
scale/shift gets the element-wise work of the output it touches. Multiply-add
counts as 2 FLOPs. Backward is taken as 2x forward (gradients of inputs and of
weights). The replay scales all of it to the iteration time it is given, so
only the proportions matter.

Usage: python3 gen_traces.py [outdir]   (default: the directory of this file)
"""
import os
import sys


def resnet50():
    rows = []

    def conv(name, cin, cout, k, hout):
        rows.append((name + ".weight", cin * cout * k * k, 2 * k * k * cin * cout * hout * hout, (cout, cin * k * k)))

    def bn(name, c, h):
        rows.append((name + ".weight", c, 2 * c * h * h))
        rows.append((name + ".bias", c, 2 * c * h * h))

    conv("conv1", 3, 64, 7, 112)
    bn("bn1", 64, 112)
    cin, h = 64, 56  # after the 3x3/2 max-pool
    for li, (planes, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]):
        for b in range(blocks):
            s = stride if b == 0 else 1
            ho = h // s
            p = "layer%d.%d." % (li + 1, b)
            conv(p + "conv1", cin, planes, 1, h)
            bn(p + "bn1", planes, h)
            conv(p + "conv2", planes, planes, 3, ho)
            bn(p + "bn2", planes, ho)
            conv(p + "conv3", planes, planes * 4, 1, ho)
            bn(p + "bn3", planes * 4, ho)
            if b == 0:
                conv(p + "downsample.0", cin, planes * 4, 1, ho)
                bn(p + "downsample.1", planes * 4, ho)
            cin, h = planes * 4, ho
    rows.append(("fc.weight", 2048 * 1000, 2 * 2048 * 1000, (1000, 2048)))
    rows.append(("fc.bias", 1000, 1000))
    return rows


def vgg16():
    rows = []
    cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
    cin, h, i = 3, 224, 0
    for v in cfg:
        if v == "M":
            h //= 2
            i += 1
            continue
        rows.append(("features.%d.weight" % i, 9 * cin * v, 2 * 9 * cin * v * h * h, (v, 9 * cin)))
        rows.append(("features.%d.bias" % i, v, v * h * h))
        cin = v
        i += 2  # conv, relu
    for j, (a, b) in enumerate([(512 * 7 * 7, 4096), (4096, 4096), (4096, 1000)]):
        rows.append(("classifier.%d.weight" % (3 * j), a * b, 2 * a * b, (b, a)))
        rows.append(("classifier.%d.bias" % (3 * j), b, b))
    return rows


def bert_base(seq=128, hid=768, inter=3072, heads=12, layers=12, vocab=30522, maxpos=512):
    rows = []

    def linear(name, a, b, tokens=seq):
        rows.append((name + ".weight", a * b, 2 * tokens * a * b, (b, a)))
        rows.append((name + ".bias", b, tokens * b))

    def ln(name):
        rows.append((name + ".weight", hid, 4 * seq * hid))
        rows.append((name + ".bias", hid, 4 * seq * hid))

    e = "embeddings."
    rows.append((e + "word_embeddings.weight", vocab * hid, seq * hid, (vocab, hid)))  # a gather
    rows.append((e + "position_embeddings.weight", maxpos * hid, seq * hid, (maxpos, hid)))  # gather + add
    rows.append((e + "token_type_embeddings.weight", 2 * hid, seq * hid, (2, hid)))
    ln(e + "LayerNorm")
    for l in range(layers):
        p = "encoder.layer.%d." % l
        linear(p + "attention.self.query", hid, hid)
        linear(p + "attention.self.key", hid, hid)
        linear(p + "attention.self.value", hid, hid)
        # scores QK^T and context AV (2 x 2*seq*seq*hid) plus the softmax, on
        # the last projection before them
        name, n, fl, shape = rows[-2]
        rows[-2] = (name, n, fl + 4 * seq * seq * hid + 5 * heads * seq * seq, shape)
        linear(p + "attention.output.dense", hid, hid)
        ln(p + "attention.output.LayerNorm")
        linear(p + "intermediate.dense", hid, inter)
        linear(p + "output.dense", inter, hid)
        ln(p + "output.LayerNorm")
    linear("pooler.dense", hid, hid, tokens=1)  # the [CLS] token only
    return rows


MODELS = {
    "resnet50": (resnet50, 25557032, "ResNet-50 (torchvision), 224x224 input"),
    "vgg16": (vgg16, 138357544, "VGG-16 (torchvision, no batch norm), 224x224 input"),
    "bert_base": (bert_base, 109482240, "BERT-base uncased (BertModel, no MLM head), seq len 128"),
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for key, (fn, want, desc) in MODELS.items():
        rows = fn()
        total = sum(r[1] for r in rows)
        if total != want:
            sys.exit("%s: %d parameters, expected %d" % (key, total, want))
        with open(os.path.join(out, key + ".trace"), "w") as f:
            f.write("# %s: gradient trace for sc_fusion_replay (perf/traces/gen_traces.py)\n" % desc)
            f.write("# %d trainable tensors, %d parameters (exact)\n" % (len(rows), total))
            f.write("# one line per tensor in forward (parameter) order: name elements fwd_flops bwd_flops,\n")
            f.write("# and for a weight its matrix: rows cols (out_features or out_channels x the rest)\n")
            f.write("# compute times are proportional to FLOPs (one sample; multiply-add = 2;\n")
            f.write("# backward = 2 x forward) and scaled by the replay to --iter-ms\n")
            for row in rows:
                name, n, fl = row[:3]
                shape = " %d %d" % row[3] if len(row) > 3 else ""
                f.write("%s %d %d %d%s\n" % (name, n, fl, 2 * fl, shape))


if __name__ == "__main__":
    main()
