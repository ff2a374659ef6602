# Flow sizes of the data-mining workload (Alizadeh et al., "pFabric", SIGCOMM 2013, after the
# measurements of VL2, SIGCOMM 2009), as the netbench simulator lists its points
# (ndal-eth/netbench, PFabricDataMiningLowerBoundFSD). Same format as websearch.cdf. Its tail
# reaches 1 GB, more than a lab run can carry: a scenario caps it with `size_max_kb`.
0 0
180 0.1
216 0.2
560 0.3
900 0.4
1100 0.5
1870 0.6
3160 0.7
10000 0.8
400000 0.9
3160000 0.95
100000000 0.98
1000000000 1
