# Flow sizes of the web-search workload (Alizadeh et al., "pFabric", SIGCOMM 2013, after the
# measurements of DCTCP, SIGCOMM 2010), as the netbench simulator lists its points
# (ndal-eth/netbench, PFabricWebSearchLowerBoundFSD). One point per line: a size in bytes and the
# probability that a flow is at most that large; a draw between two points is interpolated
# linearly (experiments/scenario/workloads.py). Mean 1.71 MB; 53 % of the flows are at most
# 80 KB, and the 30 % above 1 MB carry 95 % of the bytes.
0 0
10000 0.15
20000 0.2
30000 0.3
50000 0.4
80000 0.53
200000 0.6
1000000 0.7
2000000 0.8
5000000 0.9
10000000 0.97
30000000 1
