"""What the zygote (agents/node/zygote.py) imports once for every server it forks: torch and the
server's own modules, the seconds of a server's start that do not depend on its spec.

Nothing here may touch a GPU. CUDA initialised before a fork is unusable in the child, so each
forked server initialises it itself, after its MPS or MIG environment is set. Importing torch does
not initialise CUDA (PyTorch's DataLoader workers fork on the same rule); the check below makes a
change that breaks the rule fail here, in the zygote, before any server is forked from it.
"""

import torch

import agents.server.lifecycle
import agents.server.main  # noqa: F401

if torch.cuda.is_initialized():
    raise RuntimeError("CUDA was initialised while preloading the servers' modules: a fork would inherit it")
