# Started by bench/distributor-failover.ts in the root namespace, with two
# arguments: the interface (the edge router's segment port) and the VIP.
# Reads every frame on an AF_PACKET socket and prints, for each IPv4 TCP frame
# to the VIP, "epoch-seconds dst-mac sport tcp-flags"; "ready" once bound.
use strict; use Time::HiRes qw(time);
my ($if, $vip) = @ARGV;
my $want = pack("C4", split(/\./, $vip));
open(my $f, "<", "/sys/class/net/$if/ifindex") or die "ifindex: $!"; my $idx = <$f>; chomp $idx; close $f;
socket(my $s, 17, 3, 0x0300) or die "socket: $!";
bind($s, pack("S n i S C C a8", 17, 0x0003, $idx, 0, 0, 0, "")) or die "bind: $!";
$| = 1; print "ready\n";
my $buf;
while (defined recv($s, $buf, 256, 0)) {
  next if length($buf) < 54 || unpack("n", substr($buf, 12, 2)) != 0x0800;
  my $ihl = (ord(substr($buf, 14, 1)) & 15) * 4;
  next if ord(substr($buf, 23, 1)) != 6 || substr($buf, 30, 4) ne $want;
  my ($sport) = unpack("n", substr($buf, 14 + $ihl, 2));
  printf "%.6f %s %d %d\n", time, unpack("H12", substr($buf, 0, 6)), $sport, ord(substr($buf, 14 + $ihl + 13, 1));
}
