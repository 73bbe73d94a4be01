// Package measure holds the benchmark's measuring instruments, apart from
// what they measure so that each can be tested on its own: order statistics,
// readers of a process's CPU time and memory from Linux's /proc, a load
// generator of concurrent keep-alive clients, and the parsing of Prometheus
// text metrics (the API server's request counters among them).
//
// Where each instrument lives:
//   - stats.go: sorted copies, medians, nearest-rank percentiles, ratios of
//     alternating pairs.
//   - proc.go: CPU time (utime+stime), memory (VmRSS, VmHWM, RssAnon),
//     writes (syscw, wchar, write_bytes) and the environment of a process,
//     the machine's load average and its kernel's release.
//   - load.go: Drive, N clients calling back to back for a duration or a
//     count, with the latency percentiles and rate of the answered calls;
//     HTTPGet, a client of one keep-alive HTTP/1.1 connection.
//   - metrics.go: parsing a Prometheus text scrape and summing a family over
//     matching labels or by one label; the API server's request counts, and
//     its writes and watch events by resource.
package measure
