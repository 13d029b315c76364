"""Writes one kernel source per scale, as NATTEN's autogen scripts write its instantiations."""

import os
import sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for n in (1, 2):
    with open(os.path.join(out, f"scale_{n}.cu"), "w") as f:
        f.write(f"__global__ void scale_{n}(float* x) {{ x[threadIdx.x] *= {n}; }}\n")
