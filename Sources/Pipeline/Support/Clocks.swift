#if canImport(Glibc)
    import Glibc
#endif
import WireFormat

/// The two clocks a pipeline reads. Every duration (pacing, throttling, elapsed time) uses the
/// monotonic one; only stamps that other processes compare against use the wall clock.
public enum Clocks {
    /// Seconds on CLOCK_MONOTONIC: never jumps, shared by the threads of one machine.
    @inline(__always)
    public static func monotonicSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) * 1e-9
    }

    /// CLOCK_MONOTONIC_COARSE: the same clock as of the last kernel tick (1 to 4 ms old), for checks
    /// made per frame, where reading the precise clock cost more than the check.
    @inline(__always)
    public static func coarseMonotonicSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) * 1e-9
    }

    /// The wall clock (CLOCK_REALTIME) as a ROS time: shared by every process on the machine.
    public static func wallNow() -> RosTime {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return RosTime(sec: Int32(truncatingIfNeeded: ts.tv_sec), nanosec: UInt32(ts.tv_nsec))
    }
}
