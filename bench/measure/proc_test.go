package measure

import (
	"maps"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseCPUTimeAddsUserAndSystemTicks(t *testing.T) {
	stat, err := os.ReadFile("testdata/stat")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseCPUTime(stat)
	if err != nil {
		t.Fatal(err)
	}
	// utime 137 + stime 58 ticks of 10 ms; the command name holds spaces and
	// parentheses, which must not shift the fields.
	if want := 1950 * time.Millisecond; got != want {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestParseCPUTimeRejectsShortOrNamelessStat(t *testing.T) {
	for _, stat := range []string{"", "4242 (ota) S 1 2 3", "4242 ota S 1 2 3 4 5 6 7 8 9 10 11 12 13 14"} {
		if d, err := ParseCPUTime([]byte(stat)); err == nil {
			t.Errorf("ParseCPUTime(%q) = %v, want an error", stat, d)
		}
	}
}

func TestParseMemory(t *testing.T) {
	f, err := os.Open("testdata/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := ParseMemory(f)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Memory{RSS: 22732 << 10, PeakRSS: 31844 << 10, AnonRSS: 7168 << 10}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestParseMemoryRejectsMissingOrBadFields(t *testing.T) {
	for _, status := range []string{
		"VmHWM:\t1 kB\nVmRSS:\t1 kB\n", // no RssAnon
		"VmHWM:\t1 kB\nVmRSS:\tlots kB\nRssAnon:\t1 kB\n",
	} {
		if m, err := ParseMemory(strings.NewReader(status)); err == nil {
			t.Errorf("ParseMemory(%q) = %+v, want an error", status, m)
		}
	}
}

func TestParseIO(t *testing.T) {
	f, err := os.Open("testdata/io")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := ParseIO(f)
	if err != nil {
		t.Fatal(err)
	}
	if want := (IO{WriteCalls: 110, WrittenBytes: 4587520, StorageBytes: 4591616}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	earlier := IO{WriteCalls: 10, WrittenBytes: 587520, StorageBytes: 591616}
	if got, want := got.Minus(earlier), (IO{WriteCalls: 100, WrittenBytes: 4000000, StorageBytes: 4000000}); got != want {
		t.Errorf("Minus: got %+v, want %+v", got, want)
	}
}

func TestParseIORejectsAMissingField(t *testing.T) {
	if c, err := ParseIO(strings.NewReader("wchar: 1\nsyscw: 1\n")); err == nil || !strings.Contains(err.Error(), "write_bytes") {
		t.Errorf("ParseIO without write_bytes = %+v, %v; want an error naming the fields", c, err)
	}
}

func TestParseEnviron(t *testing.T) {
	got := ParseEnviron([]byte("GOGC=200\x00PATH=/bin:/usr/bin\x00EMPTY=\x00junk\x00GOGC=50\x00A=b=c\x00"))
	want := map[string]string{"GOGC": "200", "PATH": "/bin:/usr/bin", "EMPTY": "", "A": "b=c"}
	if !maps.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
