package kubernetes

// Permission is one verb on one core/v1 resource (and subresource) of the
// runtime's namespace, as a Role's rule or a SelfSubjectAccessReview names
// it.
type Permission struct {
	Verb        string `json:"verb"`
	Resource    string `json:"resource"`
	Subresource string `json:"subresource,omitempty"`
}

// String is the permission as kubectl auth can-i spells it ("create
// pods/portforward").
func (p Permission) String() string {
	if p.Subresource != "" {
		return p.Verb + " " + p.Resource + "/" + p.Subresource
	}
	return p.Verb + " " + p.Resource
}

// Permissions is every call the runtime makes in its namespace: servers are
// pods it creates, watches and deletes, whose logs it reads and to which it
// forwards a port (outside the cluster); the scheduler's events say why a
// pod waits; ConfigMaps own a run's pods and hold TensorRT-LLM's options
// file. perflab doctor asks the API server for each one, so a missing rule
// shows before a lab, not as a trial's failure; deploy/kubernetes/rbac.yaml
// grants them all (a test holds it to this list).
var Permissions = []Permission{
	{Verb: "create", Resource: "pods"},
	{Verb: "get", Resource: "pods"},
	{Verb: "list", Resource: "pods"},
	{Verb: "watch", Resource: "pods"},
	{Verb: "delete", Resource: "pods"},
	{Verb: "get", Resource: "pods", Subresource: "log"},
	{Verb: "create", Resource: "pods", Subresource: "portforward"},
	{Verb: "list", Resource: "events"},
	{Verb: "create", Resource: "configmaps"},
	{Verb: "get", Resource: "configmaps"},
	{Verb: "list", Resource: "configmaps"},
	{Verb: "delete", Resource: "configmaps"},
}
