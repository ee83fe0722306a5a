#!/usr/bin/env bash
# calib.sh FRAMES: motion content's MPEG-4 rate and PSNR at a few quantizers (CIF, 25 fps, GOP 12)
set -e
n=${1:-250}
d=$(mktemp -d)
${MOTION_Y4M:-target/release/examples/motion_y4m} 352 288 25 $n > $d/m.y4m
for q in 2 3 4 8 16 31; do
  nice ffmpeg -v error -nostdin -y -i $d/m.y4m -c:v mpeg4 -qscale:v $q -g 12 -bf 0 -f m4v $d/o.m4v
  bytes=$(stat -c %s $d/o.m4v)
  psnr=$(nice ffmpeg -nostdin -i $d/o.m4v -i $d/m.y4m -lavfi psnr -f null - 2>&1 | grep -o 'y:[0-9.]*' | head -1)
  echo "q$q $(python3 -c "print(round($bytes*8/($n/25)/1000,1))") kbit/s $psnr"
done
rm -rf $d
