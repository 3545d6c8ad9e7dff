# usage: source env2.sh base|new
export TWINFS_NO_BUILD=1 TWINFS_NO_APT=1 TWINFS_MGRDS=1
case $1 in
base) export TWINFS_BUILD_DIR=/var/tmp/hread/base/build TWINFS_PORT=31420 ;;
new) export TWINFS_BUILD_DIR=/work/wt-h-read/build TWINFS_PORT=31440 ;;
esac
export TWINFS_RUN_DIR=/var/tmp/hread/c-$1 TWINFS_MOUNT=/var/tmp/hread/m-$1 TWINFS_CLUSTER=hread-$1
LC=/work/wt-h-read/deploy/local-cluster
M=$TWINFS_MOUNT
