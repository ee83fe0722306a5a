// Seed 002's dumbbell in ns-3 (3.37), for `metronome bench ns3`: the same network and the same
// traffic as the Metronome scenario that command writes, so the two simulators can be read side
// by side.
//
//   cbr_src ----\                                    /---- cbr_dst
//   sq_src  ---- router1 ==== bottleneck ==== router2 ---- sq_dst
//   tcp_src ----/                                    \---- tcp_dst
//
// Every link is point-to-point with a drop-tail queue of `queue - 1` packets in the device:
// ns-3's device queue holds the packets waiting behind the one on the wire, Metronome's link
// counts that one too (crates/link/src/link.rs), so both hold the same packets. The traffic
// control layer is removed, so nothing queues above the device. On the wire ns-3 adds its 2-byte
// PPP header to each IP packet; Metronome's link carries the IP packet alone (0.2 % more time
// per 1006-byte packet here).
//
// The UDP flows are sent as Metronome's (iperf's) are: datagrams evenly spaced at the payload
// rate, the nanosecond remainder carried from gap to gap; the square wave is high for the first
// half of each period. TCP is BulkSend to a PacketSink with the chosen congestion control,
// without timestamps or SACK (as smoltcp, Metronome's TCP, sends by default).
//
// Prints one JSON document on stdout: per flow, packets sent and received, payload bytes
// received, the sum of one-way delays; the event count and the
// wall-clock time of Simulator::Run. A packet that finds the device queue full is dropped by
// ns-3's traffic-control layer (the device has stopped its queue), not by the queue itself, so
// drops are counted as packets sent and not received.

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/flow-monitor-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"
#include "ns3/version-defines.h"

#include <chrono>
#include <cstdio>
#include <string>

using namespace ns3;

namespace
{

// UDP datagrams at `high_bps` of payload, evenly spaced; with a period, high for its first half
// and silent for the second.
class PacedUdp : public Application
{
  public:
    void Setup(Address to, uint32_t payload, uint64_t high_bps, Time period, Time stop)
    {
        m_to = to;
        m_payload = payload;
        m_rate = high_bps;
        m_period = period;
        m_stop = stop;
    }

    uint64_t sent = 0;

  private:
    void StartApplication() override
    {
        m_socket = Socket::CreateSocket(GetNode(), UdpSocketFactory::GetTypeId());
        m_socket->Connect(m_to);
        m_start = Simulator::Now();
        Simulator::ScheduleNow(&PacedUdp::Tick, this);
    }

    void StopApplication() override
    {
        Simulator::Cancel(m_next);
    }

    bool High(Time since) const
    {
        if (m_period.IsZero())
        {
            return true;
        }
        return (since.GetNanoSeconds() % m_period.GetNanoSeconds()) * 2 <
               m_period.GetNanoSeconds();
    }

    void Tick()
    {
        Time since = Simulator::Now() - m_start;
        if (Simulator::Now() >= m_stop || m_rate == 0)
        {
            return;
        }
        if (!High(since))
        {
            int64_t p = m_period.GetNanoSeconds();
            m_carry = 0;
            m_next = Simulator::Schedule(NanoSeconds((since.GetNanoSeconds() / p + 1) * p) - since,
                                         &PacedUdp::Tick,
                                         this);
            return;
        }
        m_socket->Send(Create<Packet>(m_payload));
        sent++;
        unsigned __int128 numer = (unsigned __int128)m_payload * 8 * 1000000000ULL + m_carry;
        m_carry = numer % m_rate;
        m_next = Simulator::Schedule(NanoSeconds((int64_t)(numer / m_rate)), &PacedUdp::Tick, this);
    }

    Ptr<Socket> m_socket;
    Address m_to;
    uint32_t m_payload = 0;
    uint64_t m_rate = 0;
    unsigned __int128 m_carry = 0;
    Time m_period;
    Time m_start;
    Time m_stop;
    EventId m_next;
};

// What the command line sets (defaults: seed 002's dumbbell and the `udp` case).
struct Params
{
    uint64_t bottleneckBps = 4000000;
    double bottleneckDelayMs = 10;
    uint64_t accessBps = 10000000;
    double accessDelayMs = 5;
    uint32_t queue = 50;
    double duration = 73;
    double drain = 2;
    uint32_t payload = 978;
    uint64_t cbrBps = 3000000;
    uint64_t squareBps = 2000000;
    double squarePeriod = 20;
    std::string tcp = "none";
    uint32_t mss = 1460;
    uint32_t buffer = 4 << 20;

    void Parse(int argc, char* argv[])
    {
        CommandLine cmd(__FILE__);
        cmd.AddValue("bottleneckBps", "bottleneck rate, bit/s", bottleneckBps);
        cmd.AddValue("bottleneckDelayMs", "bottleneck one-way delay, ms", bottleneckDelayMs);
        cmd.AddValue("accessBps", "access links' rate, bit/s", accessBps);
        cmd.AddValue("accessDelayMs", "access links' delay, ms", accessDelayMs);
        cmd.AddValue("queue", "packets a link holds, the one on the wire included", queue);
        cmd.AddValue("duration", "how long the flows send, s", duration);
        cmd.AddValue("drain", "time after that for packets in flight, s", drain);
        cmd.AddValue("payload", "UDP payload, bytes", payload);
        cmd.AddValue("cbrBps", "the constant UDP flow, payload bit/s (0: none)", cbrBps);
        cmd.AddValue("squareBps", "the square-wave UDP flow's high rate (0: none)", squareBps);
        cmd.AddValue("squarePeriod", "the square wave's period, s", squarePeriod);
        cmd.AddValue("tcp", "none, reno (ns3::TcpNewReno) or cubic (ns3::TcpCubic)", tcp);
        cmd.AddValue("mss", "TCP segment size, bytes", mss);
        cmd.AddValue("buffer", "TCP send and receive buffers, bytes", buffer);
        cmd.Parse(argc, argv);
    }
};

} // namespace

// TCP as close to smoltcp's as ns-3 allows: the chosen congestion control, the segment size and
// buffers, and neither timestamps nor SACK (smoltcp sends neither by default; ns-3 would add 12
// bytes to every segment). Delayed ACKs and the initial window stay ns-3's own.
static bool
ConfigureTcp(const Params& p)
{
    if (p.tcp == "reno")
    {
        Config::SetDefault("ns3::TcpL4Protocol::SocketType", StringValue("ns3::TcpNewReno"));
    }
    else if (p.tcp == "cubic")
    {
        Config::SetDefault("ns3::TcpL4Protocol::SocketType", StringValue("ns3::TcpCubic"));
    }
    else if (p.tcp != "none")
    {
        std::fprintf(stderr, "dumbbell: --tcp=%s: use none, reno or cubic\n", p.tcp.c_str());
        return false;
    }
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(p.mss));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(p.buffer));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(p.buffer));
    Config::SetDefault("ns3::TcpSocketBase::Timestamp", BooleanValue(false));
    Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(false));
    return true;
}

// The hosts on each side (cbr, square, tcp) and the two routers, linked; returns the right-hand
// hosts' interfaces (their addresses).
struct Built
{
    NodeContainer left;
    NodeContainer right;
    Ipv4InterfaceContainer rightIf[3];
};

static Built
BuildDumbbell(const Params& p)
{
    Built b;
    b.left.Create(3);
    b.right.Create(3);
    NodeContainer routers;
    routers.Create(2);
    InternetStackHelper stack;
    stack.InstallAll();

    std::string held = std::to_string(p.queue > 1 ? p.queue - 1 : 1) + "p";
    PointToPointHelper access;
    access.SetDeviceAttribute("DataRate", DataRateValue(DataRate(p.accessBps)));
    access.SetChannelAttribute("Delay", TimeValue(MilliSeconds(p.accessDelayMs)));
    access.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", StringValue(held));
    PointToPointHelper bottleneck;
    bottleneck.SetDeviceAttribute("DataRate", DataRateValue(DataRate(p.bottleneckBps)));
    bottleneck.SetChannelAttribute("Delay", TimeValue(MilliSeconds(p.bottleneckDelayMs)));
    bottleneck.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", StringValue(held));

    Ipv4AddressHelper ip;
    NetDeviceContainer all = bottleneck.Install(routers.Get(0), routers.Get(1));
    ip.SetBase("10.0.0.0", "255.255.255.252");
    ip.Assign(all);
    for (uint32_t i = 0; i < 3; i++)
    {
        NetDeviceContainer l = access.Install(b.left.Get(i), routers.Get(0));
        ip.SetBase(("10.1." + std::to_string(i) + ".0").c_str(), "255.255.255.252");
        ip.Assign(l);
        NetDeviceContainer r = access.Install(routers.Get(1), b.right.Get(i));
        ip.SetBase(("10.2." + std::to_string(i) + ".0").c_str(), "255.255.255.252");
        b.rightIf[i] = ip.Assign(r);
        all.Add(l);
        all.Add(r);
    }
    // After the addresses (before them it crashes ns-3.37): no queue above the devices.
    TrafficControlHelper().Uninstall(all);
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();
    return b;
}

const uint16_t PORT = 5000;

// The UDP flows (constant, square) and the TCP transfer; returns TCP's sink (null without).
static Ptr<PacketSink>
InstallTraffic(const Params& p, Built& b)
{
    Time stop = Seconds(p.duration);
    uint64_t rates[2] = {p.cbrBps, p.squareBps};
    Time periods[2] = {Time(0), Seconds(p.squarePeriod)};
    for (int i = 0; i < 2; i++)
    {
        PacketSinkHelper sink("ns3::UdpSocketFactory",
                              InetSocketAddress(Ipv4Address::GetAny(), PORT + i));
        sink.Install(b.right.Get(i));
        Ptr<PacedUdp> udp = CreateObject<PacedUdp>();
        udp->Setup(InetSocketAddress(b.rightIf[i].GetAddress(1), PORT + i),
                   p.payload,
                   rates[i],
                   periods[i],
                   stop);
        b.left.Get(i)->AddApplication(udp);
        udp->SetStartTime(Seconds(0));
    }
    if (p.tcp == "none")
    {
        return nullptr;
    }
    PacketSinkHelper sink("ns3::TcpSocketFactory",
                          InetSocketAddress(Ipv4Address::GetAny(), PORT + 2));
    Ptr<PacketSink> tcpSink = DynamicCast<PacketSink>(sink.Install(b.right.Get(2)).Get(0));
    BulkSendHelper bulk("ns3::TcpSocketFactory",
                        InetSocketAddress(b.rightIf[2].GetAddress(1), PORT + 2));
    bulk.SetAttribute("SendSize", UintegerValue(p.mss));
    ApplicationContainer app = bulk.Install(b.left.Get(2));
    app.Start(Seconds(0));
    app.Stop(stop);
    return tcpSink;
}

// The JSON document: each flow's packets, payload bytes received and delays.
static void
PrintFlows(const Params& p,
           FlowMonitorHelper& fmh,
           Ptr<FlowMonitor> monitor,
           Ptr<PacketSink> tcpSink,
           uint64_t events,
           double wall)
{
    monitor->CheckForLostPackets();
    Ptr<Ipv4FlowClassifier> cls = DynamicCast<Ipv4FlowClassifier>(fmh.GetClassifier());
    const char* names[3] = {"cbr", "square", "tcp"};
    std::printf("{\"schema\":\"metronome.ns3-dumbbell/1\",\"ns3_version\":\"%d.%d\",",
                NS3_VERSION_MAJOR,
                NS3_VERSION_MINOR);
    std::printf("\"events\":%llu,\"wall_s\":%.6f,\"flows\":[", (unsigned long long)events, wall);
    bool first = true;
    for (const auto& [id, st] : monitor->GetFlowStats())
    {
        Ipv4FlowClassifier::FiveTuple t = cls->FindFlow(id);
        if (t.destinationPort < PORT || t.destinationPort > PORT + 2)
        {
            continue; // TCP's acknowledgements
        }
        int i = t.destinationPort - PORT;
        uint64_t payloadBytes =
            i == 2 && tcpSink ? tcpSink->GetTotalRx() : st.rxPackets * (uint64_t)p.payload;
        std::printf("%s{\"name\":\"%s\",\"tx_packets\":%u,\"rx_packets\":%u,"
                    "\"rx_payload_bytes\":%llu,\"delay_sum_s\":%.9f}",
                    first ? "" : ",",
                    names[i],
                    st.txPackets,
                    st.rxPackets,
                    (unsigned long long)payloadBytes,
                    st.delaySum.GetSeconds());
        first = false;
    }
    std::printf("]}\n");
}

int
main(int argc, char* argv[])
{
    Params p;
    p.Parse(argc, argv);
    if (!ConfigureTcp(p))
    {
        return 2;
    }
    Built b = BuildDumbbell(p);
    Ptr<PacketSink> tcpSink = InstallTraffic(p, b);
    FlowMonitorHelper fmh;
    Ptr<FlowMonitor> monitor = fmh.InstallAll();
    Simulator::Stop(Seconds(p.duration + p.drain));
    auto t0 = std::chrono::steady_clock::now();
    Simulator::Run();
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    PrintFlows(p, fmh, monitor, tcpSink, Simulator::GetEventCount(), wall);
    Simulator::Destroy();
    return 0;
}
