# peer_torch.py -- the PyTorch versions of shardq bench's codec rows, for
# `shardq bench --peer torch` (which carries this file in its binary and runs
# it with Debian's python3). Each operation is timed with the thread count
# given, twice: as a PyTorch user usually writes it (whole-tensor
# expressions, a temporary per step) and cache-chunked (the same expressions
# over slices of 64 K elements that stay in cache, into buffers allocated
# once). The arithmetic is the rows' own: symmetric absmax, 4 bits, groups of
# 128 (2048 for quantize-diff), a 32-point Hadamard as a matrix product,
# stochastic rounding as floor(v + uniform), packing two codes per byte.
#
#   python3 peer_torch.py OP ELEMENTS THREADS MIN_TIME
#
# OP: quantize, quantize-rtn, quantize-diff or dequantize. Prints
# "plain SECONDS" and "chunked SECONDS", the median time of one call over
# at least MIN_TIME seconds (and 3 calls). Exit 3 when torch is missing.
import sys, time
try:
    import torch
except Exception as e:
    sys.stderr.write("cannot import torch: %s\n" % e)
    sys.exit(3)
op, n, threads, min_time = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
torch.set_num_threads(threads)
torch.manual_seed(0)
H = torch.ones(1, 1)
while H.shape[0] < 32:  # Sylvester: [[H, H], [H, -H]]
    H = torch.cat([torch.cat([H, H], 1), torch.cat([H, -H], 1)], 0)
G = 2048 if op == "quantize-diff" else 128
CH = 1 << 16  # chunk of the cache-chunked versions (256 KB of fp32)

def pack4(q):  # int8 codes -> two per byte, element 2i in the high nibble
    q = q.view(-1, 2)
    return ((q[:, 0] << 4) | (q[:, 1] & 15)).to(torch.uint8)

def quant(y, sr, out_codes=None):  # symmetric absmax, 4 bits, groups of G
    g = y.view(-1, G)
    a = g.abs().amax(1, keepdim=True)
    m = 7.0 / a
    v = g * m
    q = torch.floor(v + torch.rand_like(v)) if sr else torch.round(v)
    q = q.clamp_(-7, 7).to(torch.int8)
    return pack4(q), a / 7.0

def plain(x, ref):
    if op == "quantize":
        return quant((x.view(-1, 32) @ H).view(-1), True)
    if op == "quantize-rtn":
        return quant(x, False)
    if op == "quantize-diff":
        return quant(x - ref, True)
    if op == "dequantize":
        codes, scales = ref
        hi = (codes.to(torch.int8) >> 4)
        lo = ((codes.to(torch.int8) << 4) >> 4)
        q = torch.stack([hi, lo], 1).view(-1, G).float()
        return ((q * scales).view(-1, 32) @ (H / 32.0)).view(-1)

class Chunked:
    """The same arithmetic over slices of CH elements, into buffers made once."""
    def __init__(self):
        self.y = torch.empty(CH)
        self.r = torch.empty(CH)
        self.a = torch.empty(CH // G, 1)
        self.qf = torch.empty(CH)
        self.q8 = torch.empty(CH, dtype=torch.int8)
        self.codes = torch.empty(n // 2, dtype=torch.uint8)
        self.scales = torch.empty(n // G, 1)
        self.out = torch.empty(n)
        self.hi = torch.empty(CH // 2, dtype=torch.int8)
        self.lo = torch.empty(CH // 2, dtype=torch.int8)

    def quant(self, y, sr, j):
        g = y.view(-1, G)
        torch.amax(torch.abs(g, out=self.qf.view(-1, G)), 1, keepdim=True, out=self.a)
        s = self.scales[j // G: j // G + CH // G]
        torch.div(self.a, 7.0, out=s)
        v = torch.div(g, s, out=self.qf.view(-1, G))  # v = y / s
        if sr:
            self.r.uniform_()
            v.add_(self.r.view(-1, G)).floor_()
        else:
            v.round_()
        v.clamp_(-7, 7)
        q = self.q8.copy_(v.view(-1)).view(-1, 2)
        c = self.codes[j // 2: j // 2 + CH // 2]
        torch.bitwise_or(torch.bitwise_left_shift(q[:, 0], 4, out=self.hi),
                         torch.bitwise_and(q[:, 1], 15, out=self.lo), out=self.hi)
        c.copy_(self.hi)

    def __call__(self, x, ref):
        for j in range(0, n, CH):
            xs = x[j: j + CH]
            if op == "quantize":
                torch.matmul(xs.view(-1, 32), H, out=self.y.view(-1, 32))
                self.quant(self.y, True, j)
            elif op == "quantize-rtn":
                self.quant(xs, False, j)
            elif op == "quantize-diff":
                torch.sub(xs, ref[j: j + CH], out=self.y)
                self.quant(self.y, True, j)
            else:
                codes, scales = ref
                c = codes[j // 2: j // 2 + CH // 2].view(torch.int8)
                torch.bitwise_right_shift(c, 4, out=self.hi)
                torch.bitwise_right_shift(torch.bitwise_left_shift(c, 4, out=self.lo), 4,
                                          out=self.lo)
                q = self.qf.view(-1, 2)
                q[:, 0].copy_(self.hi)
                q[:, 1].copy_(self.lo)
                q = self.qf.view(-1, G)
                q.mul_(scales[j // G: j // G + CH // G])
                torch.matmul(q.view(-1, 32), self.hinv,
                             out=self.out[j: j + CH].view(-1, 32))

def timed(f, x, ref):
    f(x, ref)  # warm up: allocations, page faults
    times, t0 = [], time.perf_counter()
    while True:
        t = time.perf_counter()
        f(x, ref)
        times.append(time.perf_counter() - t)
        if time.perf_counter() - t0 >= min_time and len(times) >= 3:
            break
    times.sort()
    return times[len(times) // 2]

x = torch.randn(n) * 1e-3
ref = torch.randn(n) * 1e-3 if op == "quantize-diff" else None
if op == "dequantize":
    ref = quant((x.view(-1, 32) @ H).view(-1), True)
ch = Chunked()
ch.hinv = H / 32.0
print("plain %.9g" % timed(plain, x, ref))
print("chunked %.9g" % timed(ch, x, ref))
