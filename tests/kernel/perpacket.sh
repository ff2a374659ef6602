# Per-packet cost of ckcd against pfifo in the kernel lab (docs/kernel.md, "Measured"):
# 3 s of unlimited-rate 100-byte UDP through a veth per root qdisc, three rounds; tc counts the packets.
#   python3 -m tests.kernel.lab tests/kernel/perpacket.sh --file lab/sch_ckcd.ko=datapath/kernel/build/sch_ckcd.ko \
#       --file lab/q_ckcd.so=datapath/kernel/build/q_ckcd.so
export TC_LIB_DIR=/lab
insmod /lab/sch_ckcd.ko
$IP link add v0 type veth peer name v1
$IP addr add 10.9.0.1/24 dev v0; $IP link set v0 up
$IP netns add ns; $IP link set v1 netns ns; $IP -n ns addr add 10.9.0.2/24 dev v1; $IP -n ns link set v1 up
$IP netns exec ns iperf3 -s -D
sleep 0.5
for round in 1 2 3; do
for q in "pfifo limit 1000" "ckcd limit 1000" "ckcd disc droptail limit 1000"; do
  $TC qdisc replace dev v0 root $q
  iperf3 -c 10.9.0.2 -u -b 0 -l 100 -t 3 >/dev/null 2>&1
  echo "$q | $($TC -s qdisc show dev v0 | grep -o 'Sent [0-9]* bytes [0-9]* pkt')"
  $TC qdisc del dev v0 root
done
done
