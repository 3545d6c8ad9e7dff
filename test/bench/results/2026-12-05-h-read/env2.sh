# usage: source env2.sh base|new
# new: this tree's build; base: BASE_BUILD, the build of the commit before
# the change (a separate worktree), set by whoever re-runs it.
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)
export TWINFS_NO_BUILD=1 TWINFS_NO_APT=1 TWINFS_MGRDS=1
case $1 in
base) export TWINFS_BUILD_DIR=${BASE_BUILD:?set BASE_BUILD to the base build dir} TWINFS_PORT=31420 ;;
new) export TWINFS_BUILD_DIR=$REPO/build TWINFS_PORT=31440 ;;
esac
export TWINFS_RUN_DIR=/var/tmp/hread/c-$1 TWINFS_MOUNT=/var/tmp/hread/m-$1 TWINFS_CLUSTER=hread-$1
LC=$REPO/deploy/local-cluster
M=$TWINFS_MOUNT
