#!/bin/bash
# A/B on two clusters up side by side (base, new), alternating order each round
set -u
ROUNDS=${ROUNDS:-8}; SECS=${SECS:-5}; WHAT=${WHAT:-rr}
OUT=${OUT:-/var/tmp/hread/ab2}; mkdir -p $OUT
rr() {
	( source /var/tmp/hread/env2.sh $1
	sync; echo 3 > /proc/sys/vm/drop_caches
	fio --name=rr --directory=$M/rr --filename=f --rw=randread --bs=4k --size=64M --direct=1 --ioengine=psync \
		--iodepth=1 --time_based=1 --runtime=$SECS --output-format=json --output=$OUT/rr-$1-$r.json >/dev/null
	python3 -c "import json,sys; j=json.load(open(sys.argv[1]))['jobs'][0]['read']; print('%s round %s randread iops %.0f mean_us %.1f p50_us %.1f' % (sys.argv[2], sys.argv[3], j['iops'], j['clat_ns']['mean']/1e3, j['clat_ns']['percentile']['50.000000']/1e3))" $OUT/rr-$1-$r.json $1 $r | sed "s/\$/ load $(cut -d' ' -f1 /proc/loadavg)/" | tee -a $OUT/res.txt )
}
trm() {
	( source /var/tmp/hread/env2.sh $1
	rm -rf $M/t; mkdir $M/t; tar xf /var/tmp/hread/inc.tar -C $M/t; sync -f $M; $LC ctl sync >/dev/null
	sync; echo 3 > /proc/sys/vm/drop_caches
	t0=$(date +%s.%N); rm -rf $M/t; t1r=$(date +%s.%N); sync -f $M; $LC ctl sync >/dev/null; t1=$(date +%s.%N)
	echo "$1 round $r tree_rm s $(echo "$t1 - $t0" | bc) rm_only $(echo "$t1r - $t0" | bc) load $(cut -d' ' -f1 /proc/loadavg)" | tee -a $OUT/res.txt )
}
for ((r = 1; r <= ROUNDS; r++)); do
	if ((r % 2)); then $WHAT base; $WHAT new; else $WHAT new; $WHAT base; fi
done
