from setuptools import find_packages, setup

setup(
    name="ckcd-coex",
    version="0.1.0",
    description="OpenFlow 1.3 (Ryu) controller and userspace datapath that let "
                "flows with different congestion controls share a bottleneck",
    python_requires=">=3.11",
    packages=find_packages(include=["coex*", "ryu_app*", "ovs_config*",
                                    "topologies*", "experiments*"]),
    py_modules=["ckcd_coex"],
    install_requires=["ryu==4.34", "eventlet==0.41.3", "networkx", "prometheus_client"],
    entry_points={"console_scripts": ["ckcd-coex = experiments.cli:main",
                                      "ckcd-coex-controller = ryu_app.launch:main"]},
)
