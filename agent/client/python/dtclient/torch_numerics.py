"""What a PyTorch rank computes with: its numerics identity.

A resume is bit-identical to an uninterrupted run only while every attempt
computes with the same kernels.  This module describes the process's:
torch's version, the device (and on a GPU its name, compute capability and
the CUDA, cuDNN and NCCL versions), the determinism settings, the intra-op
threads, and the BLAS library torch loaded (on Debian, OpenBLAS: its
version and the core type whose kernels it picked).  dtclient.torch's
Trainer sends it to the controller once (Client.numerics), with "pin_env",
the variables that make a later attempt pick the same kernels
(OPENBLAS_CORETYPE, and OPENBLAS_L2_SIZE when set).
"""
import ctypes
import os

import torch


def _openblas():
    """(version, core) of the OpenBLAS this process loaded, or None."""
    try:
        with open("/proc/self/maps") as f:
            paths = {ln.split()[-1] for ln in f if "openblas" in ln and "/" in ln}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            lib.openblas_get_config.restype = ctypes.c_char_p
            conf = (lib.openblas_get_config() or b"").decode(errors="replace").split()
            core = (lib.openblas_get_corename() or b"unknown").decode(errors="replace")
            return (conf[1] if len(conf) > 1 else "unknown"), core
        except (OSError, AttributeError):
            continue
    return None


def identity(device=None):
    """The numerics identity of this process (a dict for Client.numerics).
    device: the torch.device the model runs on (default: CPU)."""
    dev = torch.device(device) if device is not None else torch.device("cpu")
    ident = {
        "trainer": "torch",
        "torch": str(torch.__version__),
        "device": dev.type,
        "threads": int(torch.get_num_threads()),
        "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
    }
    pin = {}
    if dev.type == "cuda" and torch.cuda.is_available():
        idx = dev.index if dev.index is not None else torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(idx)
        ident["device"] = torch.cuda.get_device_name(idx)
        ident["compute_capability"] = "%d.%d" % (major, minor)
        ident["cuda_runtime"] = str(torch.version.cuda)
        ident["cudnn"] = str(torch.backends.cudnn.version())
        try:
            nccl = torch.cuda.nccl.version()
            ident["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
        except (AttributeError, RuntimeError):
            pass
        ident["tf32_matmul"] = bool(torch.backends.cuda.matmul.allow_tf32)
    blas = _openblas()
    if blas:
        ident["blas"] = "OpenBLAS"
        ident["blas_version"], ident["blas_core"] = blas
        pin["OPENBLAS_CORETYPE"] = blas[1]
        if os.environ.get("OPENBLAS_L2_SIZE"):
            pin["OPENBLAS_L2_SIZE"] = os.environ["OPENBLAS_L2_SIZE"]
    ident["pin_env"] = pin
    return ident
