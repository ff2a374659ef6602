import os

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

# Installed beside the packages: arms ryu_app/eventlet_shim.py at interpreter start, which Ryu
# 4.34 needs on today's eventlet (scripts/setup.sh writes the same file for a checkout's venv).
SHIM_PTH = "ckcd_coex_eventlet_shim.pth"


class BuildWithShim(build_py):
    """build_py plus SHIM_PTH at the top of the build, so the wheel puts it in site-packages."""

    def run(self):
        super().run()
        with open(os.path.join(self.build_lib, SHIM_PTH), "w") as f:
            f.write("import ryu_app.eventlet_shim as s; s.install()\n")

    def get_outputs(self, include_bytecode=True):
        return super().get_outputs(include_bytecode) + [os.path.join(self.build_lib, SHIM_PTH)]

HERE = os.path.dirname(os.path.abspath(__file__))
# The one place the version is written: VERSION (read here, by scripts/dkms.sh and by `make deb`).
with open(os.path.join(HERE, "VERSION")) as f:
    VERSION = f.read().strip()

setup(
    name="ckcd-coex",
    version=VERSION,
    description="OpenFlow 1.3 (Ryu or os-ken) controller and userspace datapath that let "
                "flows with different congestion controls share a bottleneck",
    license="GPL-2.0-only",
    python_requires=">=3.10",
    packages=find_packages(include=["coex*", "ryu_app*", "ovs_config*",
                                    "topologies*", "experiments*"]),
    py_modules=["ckcd_coex"],
    package_data={"ryu_app": ["ui/*"], "experiments": ["scenarios/*.toml", "traces/*.trace", "workloads/*.cdf"],
                  "coex": ["*.ovsschema"]},
    cmdclass={"build_py": BuildWithShim},
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
