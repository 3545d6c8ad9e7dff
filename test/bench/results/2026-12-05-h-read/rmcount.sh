#!/bin/bash
# counts requests of an rm -rf of the extracted tree
source /var/tmp/hread/env.sh
M=$TWINFS_MOUNT; O=${1:-/var/tmp/hread/rm}; mkdir -p $O
rm -rf $M/t; mkdir $M/t; tar xf /var/tmp/hread/inc.tar -C $M/t
sync -f $M; $LC ctl sync >/dev/null; sync; echo 3 > /proc/sys/vm/drop_caches
snap() { for p in 31405 31406 31407 31408 31409; do curl -s http://127.0.0.1:$p/metrics | grep '^twinfs_requests_total' | sed "s/^/$p /"; done; }
snap > $O/before.txt
PP=
perf record -a -e fuse:fuse_request_send -e fuse:fuse_request_end -o $O/fuse.data 2>/dev/null & PP=$!; sleep 1
t0=$(date +%s.%N); rm -rf $M/t; t1r=$(date +%s.%N); sync -f $M; $LC ctl sync >/dev/null; t1=$(date +%s.%N); kill -INT $PP; wait $PP

snap > $O/after.txt
echo "time $(echo "$t1 - $t0" | bc) rm-only $(echo "$t1r - $t0" | bc)"
perf script -i $O/fuse.data 2>/dev/null | python3 /var/tmp/hread/fuselat.py $(mountpoint -d $M | cut -d: -f2)
python3 - $O/before.txt $O/after.txt <<'P'
import sys
def rd(f):
    d={}
    for l in open(f):
        p,k,v=l.split()
        d[(p,k)]=float(v)
    return d
a=rd(sys.argv[1]); b=rd(sys.argv[2])
for k in sorted(b):
    dv=b[k]-a.get(k,0)
    if dv: print(k[0], k[1].split('{')[1].rstrip('}'), int(dv))
P
