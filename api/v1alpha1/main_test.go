package v1alpha1_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/agentrewind/agentrewind/internal/testenv"
)

// apiServer is the envtest control plane shared by this package's tests, with the generated CRDs.
var apiServer *testenv.APIServer

func TestMain(m *testing.M) {
	var err error
	apiServer, err = testenv.StartAPIServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, "api/v1alpha1 tests need a control plane:", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := apiServer.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
	os.Exit(code)
}
