# First cross-check of a baseline (docs/kernel.md): Linux's sch_codel against the core's codel
# through sch_ckcd, as the leaf of the same 1 Mbit/s HTB class under the same UDP overload (two
# 4 Mbit/s flows, 1200-byte datagrams, 6 s). Prints packets sent and dropped and the backlog
# sampled every 0.5 s from 2 s on.
#   python3 -m tests.kernel.lab tests/kernel/codel_crosscheck.sh --file lab/sch_ckcd.ko=datapath/kernel/build/sch_ckcd.ko \
#       --file lab/q_ckcd.so=datapath/kernel/build/q_ckcd.so
export TC_LIB_DIR=/lab
insmod /lab/sch_ckcd.ko
modprobe sch_htb; modprobe sch_codel
$IP link add v0 type veth peer name v1
$IP addr add 10.9.0.1/24 dev v0; $IP link set v0 up
$IP netns add ns; $IP link set v1 netns ns; $IP -n ns addr add 10.9.0.2/24 dev v1; $IP -n ns link set v1 up
$IP netns exec ns iperf3 -s -D -p 5201
$IP netns exec ns iperf3 -s -D -p 5202
sleep 0.5
for round in 1 2; do
for leaf in "codel limit 80 target 5ms interval 100ms" "ckcd disc codel limit 80 target 5ms interval 100ms" "pfifo limit 80"; do
  $TC qdisc add dev v0 root handle 1: htb default 1
  $TC class add dev v0 parent 1: classid 1:1 htb rate 1mbit ceil 1mbit
  $TC qdisc add dev v0 parent 1:1 handle 10: $leaf
  iperf3 -c 10.9.0.2 -p 5201 -u -b 4M -l 1200 -t 6 >/dev/null 2>&1 &
  iperf3 -c 10.9.0.2 -p 5202 -u -b 4M -l 1200 -t 6 >/dev/null 2>&1 &
  sleep 2
  samples=""
  for i in 1 2 3 4 5 6 7 8; do
    samples="$samples $($TC -s qdisc show dev v0 parent 1:1 | grep -o 'backlog [0-9]*b [0-9]*p' | head -1 | awk '{print $3}')"
    sleep 0.5
  done
  wait
  echo "$leaf | $($TC -s qdisc show dev v0 parent 1:1 | grep -o 'Sent [0-9]* bytes [0-9]* pkt (dropped [0-9]*' | head -1) | backlog:$samples"
  $TC qdisc del dev v0 root
  sleep 1  # the iperf3 servers finish their test before the next one starts
done
done
