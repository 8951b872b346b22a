"""What the twins know about GPU models: GFD facts and MIG profiles.

Keys are the `nvidia.com/gpu.product` label values (the cluster file's
`gpus.model`). PCI ids are the ones default-mig-parted-config.yaml filters on
(device id + vendor 10DE). MIG profile memory/SM numbers for H100-80GB come
from examples/mig-mixed-node-labels.json; the others are close approximations
(good enough for labels; counts and names are what tests check).
"""

# profile -> (compute slices, memory MiB, multiprocessors)
_H100_80 = {"1g.10gb": (1, 9984, 16), "1g.10gb+me": (1, 9984, 16), "1g.20gb": (1, 19968, 26),
            "2g.20gb": (2, 20096, 32), "3g.40gb": (3, 40320, 60), "4g.40gb": (4, 40320, 64),
            "7g.80gb": (7, 80896, 132)}
_A100_40 = {"1g.5gb": (1, 4864, 14), "1g.5gb+me": (1, 4864, 14), "1g.10gb": (1, 9856, 14),
            "2g.10gb": (2, 9856, 28), "3g.20gb": (3, 19968, 42), "4g.20gb": (4, 19968, 56),
            "7g.40gb": (7, 40192, 98)}
_A100_80 = {"1g.10gb": (1, 9728, 14), "1g.10gb+me": (1, 9728, 14), "1g.20gb": (1, 19968, 14),
            "2g.20gb": (2, 19968, 28), "3g.40gb": (3, 40192, 42), "4g.40gb": (4, 40192, 56),
            "7g.80gb": (7, 80384, 98)}
_A30 = {"1g.6gb": (1, 5836, 14), "1g.6gb+me": (1, 5836, 14), "2g.12gb": (2, 11873, 28),
        "2g.12gb+me": (2, 11873, 28), "4g.24gb": (4, 24062, 56)}
_H100_NVL = {"1g.12gb": (1, 11008, 16), "1g.12gb+me": (1, 11008, 16), "1g.24gb": (1, 22912, 26),
             "2g.24gb": (2, 23808, 32), "3g.47gb": (3, 47488, 60), "4g.47gb": (4, 47488, 64),
             "7g.94gb": (7, 95488, 132)}
_H200 = {"1g.18gb": (1, 16384, 16), "1g.18gb+me": (1, 16384, 16), "1g.35gb": (1, 32768, 26),
         "2g.35gb": (2, 33792, 32), "3g.71gb": (3, 69632, 60), "4g.71gb": (4, 69632, 64),
         "7g.141gb": (7, 140288, 132)}
_B200 = {"1g.23gb": (1, 23040, 18), "1g.23gb+me": (1, 23040, 18), "1g.45gb": (1, 44800, 18),
         "2g.45gb": (2, 46080, 36), "3g.90gb": (3, 92160, 54), "4g.90gb": (4, 92160, 72),
         "7g.180gb": (7, 180224, 148)}


def _m(family, major, minor, pci, memory_mib, mig=None, slices=7):
    return {"family": family, "compute": (major, minor), "pci": pci, "memory_mib": memory_mib,
            "mig": mig or {}, "slices": slices}


MODELS = {
    "NVIDIA-H100-80GB-HBM3": _m("hopper", 9, 0, "0x233010DE", 81559, _H100_80),
    "NVIDIA-H100-PCIe": _m("hopper", 9, 0, "0x233110DE", 81559, _H100_80),
    "NVIDIA-H800-80GB-HBM3": _m("hopper", 9, 0, "0x232410DE", 81559, _H100_80),
    "NVIDIA-H100-NVL": _m("hopper", 9, 0, "0x232110DE", 95830, _H100_NVL),
    "NVIDIA-H200": _m("hopper", 9, 0, "0x233510DE", 143771, _H200),
    "NVIDIA-A100-SXM4-40GB": _m("ampere", 8, 0, "0x20B010DE", 40960, _A100_40),
    "NVIDIA-A100-PCIE-40GB": _m("ampere", 8, 0, "0x20F110DE", 40960, _A100_40),
    "NVIDIA-A100-SXM4-80GB": _m("ampere", 8, 0, "0x20B210DE", 81920, _A100_80),
    "NVIDIA-A100-80GB-PCIe": _m("ampere", 8, 0, "0x20B510DE", 81920, _A100_80),
    "NVIDIA-A30": _m("ampere", 8, 0, "0x20B710DE", 24576, _A30, slices=4),
    "NVIDIA-B200": _m("blackwell", 10, 0, "0x290110DE", 183359, _B200),
    "NVIDIA-L40S": _m("ada-lovelace", 8, 9, "0x26B910DE", 46068),
    "NVIDIA-L4": _m("ada-lovelace", 8, 9, "0x27B810DE", 23034),
    "NVIDIA-A10": _m("ampere", 8, 6, "0x223610DE", 23028),
    "Tesla-T4": _m("turing", 7, 5, "0x1EB810DE", 15360),
}


def model_info(product, memory_mib=None):
    """Facts for a product name; unknown names get a neutral entry without MIG."""
    info = dict(MODELS.get(product) or _m("unknown", 8, 0, "0x000010DE", memory_mib or 16384))
    if memory_mib:
        info["memory_mib"] = memory_mib
    return info


def resource_suffix(profile):
    """MIG profile -> resource/label suffix: "1g.10gb+me" -> "1g.10gb.me"."""
    return profile.replace("+", ".")


def profile_labels(prefix, product, profile, info):
    """GFD labels describing one MIG profile, under `prefix` ("nvidia.com/gpu" or
    "nvidia.com/mig-1g.10gb"), like the real GFD output."""
    g, mem, sms = info["mig"][profile]
    media = "+me" in profile or g == 7
    full = info["slices"]
    return {
        prefix + ".engines.copy": str(g),
        prefix + ".engines.decoder": str(full if "+me" in profile else g),
        prefix + ".engines.encoder": "0",
        prefix + ".engines.jpeg": str(full if "+me" in profile else g),
        prefix + ".engines.ofa": "1" if media else "0",
        prefix + ".memory": str(mem),
        prefix + ".multiprocessors": str(sms),
        prefix + ".product": "%s-MIG-%s" % (product, resource_suffix(profile)),
        prefix + ".slices.ci": str(g),
        prefix + ".slices.gi": str(g),
    }
