import os

from setuptools import find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))
# The one place the version is written: VERSION (read here, by scripts/dkms.sh and by `make deb`).
with open(os.path.join(HERE, "VERSION")) as f:
    VERSION = f.read().strip()

setup(
    name="ckcd-coex",
    version=VERSION,
    description="OpenFlow 1.3 (Ryu or os-ken) controller and userspace datapath that let "
                "flows with different congestion controls share a bottleneck",
    python_requires=">=3.10",
    packages=find_packages(include=["coex*", "ryu_app*", "ovs_config*",
                                    "topologies*", "experiments*"]),
    py_modules=["ckcd_coex"],
    install_requires=["networkx", "prometheus_client"],
    # One framework or the other: Ryu 4.34 (Python <= 3.11, with the eventlet it runs on) or
    # os-ken (maintained, Python 3.10-3.13). requirements/ holds the exact versions we test.
    extras_require={
        "ryu": ["ryu==4.34", "eventlet==0.41.3"],
        "os-ken": ["os-ken>=4.2.2,<5", "eventlet"],
    },
    entry_points={"console_scripts": ["ckcd-coex = experiments.cli:main",
                                      "ckcd-coex-controller = ryu_app.launch:main"]},
)
