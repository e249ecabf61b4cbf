package blob_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/troupe-dev/troupe/internal/azuritetest"
	"github.com/troupe-dev/troupe/internal/gcstest"
	"github.com/troupe-dev/troupe/internal/s3test"
)

// backend is a kind of store the conformance tests run on, every scheme
// the README names: file, mem, and a real server of each cloud scheme
// (versitygw for s3://, fake-gcs-server for gs://, Azurite for azblob://),
// each a process of its own on a loopback port.
type backend struct {
	name string
	// url is a store of this kind, empty when the test starts.
	url string
	// shared: a second Open of url is another client of the same store
	// (another worker); mem:// stores are each their own.
	shared bool
	// md5: the store's listing gives each blob's MD5.
	md5 bool
}

// servers are the cloud servers the package's tests share: started by
// the first test that asks (Azurite alone takes seconds to start), stopped
// by TestMain when every test has run. Each test gets buckets of its own.
var servers struct {
	once sync.Once
	tb   *packageTB
	s3   *s3test.Server
	gcs  *gcstest.Server
	az   *azuritetest.Server
}

// calls numbers the calls of backends: each gets its own prefix in the
// servers' one bucket, so a test's stores start empty however often it
// runs (-count).
var calls atomic.Int64

func TestMain(m *testing.M) {
	code := m.Run()
	if servers.tb != nil {
		servers.tb.stop()
	}
	os.Exit(code)
}

// backends returns the stores of every kind, each empty: the cloud ones
// are the servers' bucket "troupe" under a prefix of their own (gocloud's
// prefix parameter, which Troupe takes on every scheme). A server that is
// not installed fails the test, saying to run scripts/setup.sh.
func backends(t *testing.T) []backend {
	t.Helper()
	servers.once.Do(func() {
		tb := &packageTB{}
		servers.tb = tb
		done := make(chan struct{})
		go func() {
			defer close(done)
			servers.s3 = s3test.Start(tb, "troupe")
			for _, kv := range servers.s3.Env() {
				k, v, _ := strings.Cut(kv, "=")
				os.Setenv(k, v)
			}
			servers.gcs = gcstest.Start(tb, "troupe")
			servers.az = azuritetest.Start(tb, "troupe")
		}()
		<-done
	})
	if servers.tb.failed != "" {
		t.Fatal(servers.tb.failed)
	}
	prefix := fmt.Sprintf("&prefix=%s-%d/", strings.ToLower(t.Name()), calls.Add(1))
	return []backend{
		{name: "file", url: t.TempDir(), shared: true},
		{name: "mem", url: "mem://", md5: true},
		{name: "s3", url: servers.s3.URL("troupe") + prefix, shared: true, md5: true},
		{name: "gs", url: servers.gcs.URL("troupe") + prefix, shared: true, md5: true},
		{name: "azblob", url: servers.az.URL("troupe") + prefix, shared: true, md5: true},
	}
}

// packageTB is the testing.TB of the shared servers, which outlive any
// one test: the few methods the servers' Start functions call, with
// cleanups run by TestMain. Fatal ends the goroutine that starts them,
// as testing's does, and every test that asks for them fails with its
// message.
type packageTB struct {
	testing.TB // nil: only the methods below are called
	failed     string
	cleanups   []func()
	dirs       []string
}

func (p *packageTB) Helper()           {}
func (p *packageTB) Cleanup(f func())  { p.cleanups = append(p.cleanups, f) }
func (p *packageTB) Fatal(args ...any) { p.failed = fmt.Sprint(args...); runtime.Goexit() }
func (p *packageTB) Fatalf(f string, args ...any) {
	p.failed = fmt.Sprintf(f, args...)
	runtime.Goexit()
}

func (p *packageTB) TempDir() string {
	dir, err := os.MkdirTemp("", "troupe-blob-test-")
	if err != nil {
		p.Fatal(err)
	}
	p.dirs = append(p.dirs, dir)
	return dir
}

func (p *packageTB) stop() {
	for i := len(p.cleanups) - 1; i >= 0; i-- {
		p.cleanups[i]()
	}
	for _, d := range p.dirs {
		os.RemoveAll(d)
	}
}
