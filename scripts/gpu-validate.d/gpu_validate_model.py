"""The small model factory gpu-validate hands to `gpu-doctor oom --batch-probe gpu_validate_model:make`.

Two 3×3 convolutions on 512×512 images: about 300 MiB of activations and gradients per sample, so an 80 GB
GPU runs out of memory between batch 128 and 512, well below the cap of 1024, while one forward and backward
pass of the largest batch stays far below a second on a Hopper GPU.
"""


def make():
    import torch

    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10))

    def make_batch(n):
        return torch.randn(n, 3, 512, 512, device="cuda")

    return model, make_batch
