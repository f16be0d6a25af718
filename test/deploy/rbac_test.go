package deploy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
)

// permission is one verb on one resource, granted by one role.
type permission struct{ role, group, resource, verb string }

func (p permission) String() string {
	g := p.group
	if g == "" {
		g = "core"
	}
	if p.role == "" {
		return fmt.Sprintf("%s %s/%s", p.verb, g, p.resource)
	}
	return fmt.Sprintf("%s: %s %s/%s", p.role, p.verb, g, p.resource)
}

// managerPermissions expands every rule bound to the manager's ServiceAccount.
func managerPermissions(all objects) (map[permission]bool, error) {
	sa, err := all.one("ServiceAccount")
	if err != nil {
		return nil, err
	}
	bound := func(subjects []rbacv1.Subject) bool {
		for _, s := range subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Name == sa.GetName() && s.Namespace == sa.GetNamespace() {
				return true
			}
		}
		return false
	}
	roles := map[string]bool{} // kind/name of bound roles
	for _, u := range all.ofKind("ClusterRoleBinding") {
		b, err := as[rbacv1.ClusterRoleBinding](u)
		if err != nil {
			return nil, err
		}
		if bound(b.Subjects) {
			roles[b.RoleRef.Kind+"/"+b.RoleRef.Name] = true
		}
	}
	for _, u := range all.ofKind("RoleBinding") {
		b, err := as[rbacv1.RoleBinding](u)
		if err != nil {
			return nil, err
		}
		if bound(b.Subjects) {
			roles[b.RoleRef.Kind+"/"+b.RoleRef.Name] = true
		}
	}
	out := map[permission]bool{}
	add := func(name string, rules []rbacv1.PolicyRule) error {
		for _, r := range rules {
			if len(r.NonResourceURLs) > 0 {
				return fmt.Errorf("role %s: unexpected nonResourceURLs", name)
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						if len(r.ResourceNames) == 0 {
							out[permission{name, g, res, v}] = true
						}
						// A rule restricted by name is listed per name: resource[name].
						for _, n := range r.ResourceNames {
							out[permission{name, g, res + "[" + n + "]", v}] = true
						}
					}
				}
			}
		}
		return nil
	}
	found := 0
	for _, u := range all.ofKind("ClusterRole") {
		if roles["ClusterRole/"+u.GetName()] {
			cr, err := as[rbacv1.ClusterRole](u)
			if err != nil {
				return nil, err
			}
			found++
			if err := add(cr.Name, cr.Rules); err != nil {
				return nil, err
			}
		}
	}
	for _, u := range all.ofKind("Role") {
		if roles["Role/"+u.GetName()] {
			r, err := as[rbacv1.Role](u)
			if err != nil {
				return nil, err
			}
			found++
			if err := add(r.Name, r.Rules); err != nil {
				return nil, err
			}
		}
	}
	if found != len(roles) {
		return nil, fmt.Errorf("bindings name %d roles, %d are rendered", len(roles), found)
	}
	return out, nil
}

var codeSpan = regexp.MustCompile("`([^`]*)`")

// documentedPermissions reads the permission tables of docs/permissions.md: rows that start
// with a backticked role name. unused holds the rows under "Granted but not used".
func documentedPermissions(path string) (used, unused map[permission]bool, files []string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	used, unused = map[permission]bool{}, map[permission]bool{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if h, ok := strings.CutPrefix(line, "## "); ok {
			section = h
			continue
		}
		// The tenants' roles are bound to no manager identity: documentedTenantRoles reads them.
		if section == tenantsSection || !strings.HasPrefix(line, "| `captf-") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 6 {
			return nil, nil, nil, fmt.Errorf("%s: a permission row needs 6 cells: %s", path, line)
		}
		spans := func(cell string) []string {
			var out []string
			for _, m := range codeSpan.FindAllStringSubmatch(cell, -1) {
				out = append(out, m[1])
			}
			return out
		}
		roles := spans(cells[0])
		group := strings.TrimSpace(cells[1])
		if group == "core" {
			group = ""
		} else if g := spans(cells[1]); len(g) == 1 {
			group = g[0]
		} else {
			return nil, nil, nil, fmt.Errorf("%s: bad API group cell %q", path, cells[1])
		}
		target := used
		if strings.HasPrefix(section, "Granted but not used") {
			target = unused
		} else {
			files = append(files, spans(cells[5])...)
		}
		for _, res := range spans(cells[2]) {
			for _, v := range spans(cells[3]) {
				target[permission{roles[0], group, res, v}] = true
			}
		}
	}
	return used, unused, files, sc.Err()
}

func sorted(m map[permission]bool) []string {
	var out []string
	for p := range m {
		out = append(out, p.String())
	}
	slices.Sort(out)
	return out
}

var _ = Describe("the manager's RBAC", func() {
	It("grants the manager exactly the permissions docs/permissions.md lists, and nothing broad", func() {
		all, err := kustomizeBuild("config/default")
		Expect(err).NotTo(HaveOccurred())
		rendered, err := managerPermissions(all)
		Expect(err).NotTo(HaveOccurred())
		Expect(rendered).NotTo(BeEmpty())
		for p := range rendered {
			Expect(p.verb).NotTo(Equal("*"), p.String())
			Expect(p.resource).NotTo(Equal("*"), p.String())
			Expect(p.group).NotTo(Equal("*"), p.String())
			Expect([]string{"escalate", "bind", "impersonate", "deletecollection"}).NotTo(ContainElement(p.verb), p.String())
		}

		used, unused, files, err := documentedPermissions(filepath.Join(repo, "docs", "permissions.md"))
		Expect(err).NotTo(HaveOccurred())
		for p := range unused {
			Expect(used).NotTo(HaveKey(p), "%s is listed as used and as unused", p)
		}
		documented := map[permission]bool{}
		for p := range used {
			documented[p] = true
		}
		for p := range unused {
			documented[p] = true
		}
		undocumented, stale := map[permission]bool{}, map[permission]bool{}
		for p := range rendered {
			if !documented[p] {
				undocumented[p] = true
			}
		}
		for p := range documented {
			if !rendered[p] {
				stale[p] = true
			}
		}
		Expect(sorted(undocumented)).To(BeEmpty(), "granted, but docs/permissions.md does not say why")
		Expect(sorted(stale)).To(BeEmpty(), "listed in docs/permissions.md, but no longer granted: remove the rows")
		for _, f := range files {
			if f == "none" {
				continue
			}
			_, err := os.Stat(filepath.Join(repo, f))
			Expect(err).NotTo(HaveOccurred(), "docs/permissions.md names %s as a user of a permission", f)
		}
		fmt.Fprintf(GinkgoWriter, "manager permissions: %d granted, %d used, %d granted but unused:\n  %s\n",
			len(rendered), len(used), len(unused), strings.Join(sorted(unused), "\n  "))
	})

	It("grants the runner's Role only what the manager itself holds", func() {
		// Kubernetes refuses to let the manager create a Role granting more than it holds;
		// the envtest spec that reconciles the samples proves it end to end.
		all, err := kustomizeBuild("config/default")
		Expect(err).NotTo(HaveOccurred())
		rendered, err := managerPermissions(all)
		Expect(err).NotTo(HaveOccurred())
		for _, want := range []permission{
			{group: "", resource: "secrets"}, {group: "coordination.k8s.io", resource: "leases"},
		} {
			for _, v := range []string{"get", "list", "create", "update", "patch", "delete"} {
				Expect(rendered).To(HaveKey(permission{"captf-manager-role", want.group, want.resource, v}))
			}
		}
	})
})

// auditEvent is the part of an audit log line the check reads.
type auditEvent struct {
	Verb             string `json:"verb"`
	Stage            string `json:"stage"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		APIGroup    string `json:"apiGroup"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// observedPermissions reads what a user did from the API server's audit log: every
// (group, resource, verb) it used, and every request the API server refused as forbidden.
func observedPermissions(path, user string) (used map[permission]int, forbidden []string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read audit log: %w", err)
	}
	used = map[permission]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, nil, fmt.Errorf("parse audit log: %w", err)
		}
		if e.ImpersonatedUser == nil || e.ImpersonatedUser.Username != user || e.ObjectRef == nil {
			continue
		}
		// A watch that is still open has only reached ResponseStarted.
		if e.Stage != "ResponseComplete" && (e.Stage != "ResponseStarted" || e.Verb != "watch") {
			continue
		}
		res := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			res += "/" + e.ObjectRef.Subresource
		}
		p := permission{group: e.ObjectRef.APIGroup, resource: res, verb: e.Verb}
		if e.ResponseStatus != nil && e.ResponseStatus.Code == http.StatusForbidden {
			forbidden = append(forbidden, fmt.Sprintf("%s %s/%s", p, e.ObjectRef.Namespace, e.ObjectRef.Name))
			continue
		}
		used[p]++
	}
	return used, forbidden, sc.Err()
}
