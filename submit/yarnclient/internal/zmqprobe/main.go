// Command zmqprobe links libzmq and prints the file its process mapped
// libzmq from, as "libzmq <path>". The tests run it as a YARN task to see
// that the shipped copy in the container's lib/ is used, not the system's.
package main

// #cgo pkg-config: libzmq
// #include <zmq.h>
import "C"

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

func main() {
	var major, minor, patch C.int
	C.zmq_version(&major, &minor, &patch)
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 6 && strings.Contains(fields[5], "libzmq") {
			fmt.Printf("libzmq %s\n", fields[5])
			return
		}
	}
	fmt.Fprintln(os.Stderr, "libzmq is not mapped")
	os.Exit(1)
}
