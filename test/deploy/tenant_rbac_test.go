package deploy_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// aggregateLabel is the label prefix Kubernetes' built-in ClusterRoles aggregate by:
// rbac.authorization.k8s.io/aggregate-to-<edit|admin|view>: "true".
const aggregateLabel = "rbac.authorization.k8s.io/aggregate-to-"

// tenantVerbs are the only verbs a tenants' ClusterRole may grant (docs/permissions.md,
// "Tenants"): no deletecollection, no escalate, bind or impersonate, no wildcard.
var tenantVerbs = []string{"create", "get", "list", "watch", "update", "patch", "delete"}

// tenantRoleDoc is one row of docs/permissions.md's "Tenants" table.
type tenantRoleDoc struct {
	aggregatedInto []string
	perms          map[permission]bool
}

// documentedTenantRoles reads the "Tenants" table of docs/permissions.md: rows that start with
// a backticked role name, with the built-in roles it is aggregated into, its API group, its
// resources and its verbs.
func documentedTenantRoles(path string) (map[string]*tenantRoleDoc, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	spans := func(cell string) []string {
		var out []string
		for _, m := range codeSpan.FindAllStringSubmatch(cell, -1) {
			out = append(out, m[1])
		}
		return out
	}
	out := map[string]*tenantRoleDoc{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if h, ok := strings.CutPrefix(line, "## "); ok {
			section = h
			continue
		}
		if section != tenantsSection || !strings.HasPrefix(line, "| `captf-") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 5 {
			return nil, fmt.Errorf("%s: a tenant role row needs 5 cells: %s", path, line)
		}
		role, groups := spans(cells[0]), spans(cells[2])
		if len(role) != 1 || len(groups) != 1 {
			return nil, fmt.Errorf("%s: bad role or API group cell: %s", path, line)
		}
		d := out[role[0]]
		if d == nil {
			d = &tenantRoleDoc{perms: map[permission]bool{}}
			out[role[0]] = d
		}
		d.aggregatedInto = append(d.aggregatedInto, spans(cells[1])...)
		for _, res := range spans(cells[3]) {
			for _, v := range spans(cells[4]) {
				d.perms[permission{role[0], groups[0], res, v}] = true
			}
		}
	}
	return out, sc.Err()
}

// tenantsSection is the heading of docs/permissions.md that documents the tenants' roles; the
// manager's permission check skips it.
const tenantsSection = "Tenants"

var _ = Describe("the tenants' ClusterRoles", func() {
	It("ship in the release manifests, aggregated into edit, admin and view, granting CAPTF's namespaced kinds and no status, Secret or cluster-scoped kind", func() {
		// config/clusterctl is what `make release-manifests` renders into
		// infrastructure-components.yaml (the image placeholder aside), and so what
		// `clusterctl init` installs; it builds on config/default.
		decoded, err := kustomizeBuild("config/clusterctl")
		Expect(err).NotTo(HaveOccurred())
		all := objects(decoded)

		By("CAPTF's kinds and their scope, from the rendered CRDs")
		namespaced, clusterScoped := []string{}, []string{}
		for _, u := range all.ofKind("CustomResourceDefinition") {
			crd, err := as[apiextensionsv1.CustomResourceDefinition](u)
			Expect(err).NotTo(HaveOccurred())
			Expect(crd.Spec.Group).To(Equal(infraGroup), crd.Name)
			if crd.Spec.Scope == apiextensionsv1.NamespaceScoped {
				namespaced = append(namespaced, crd.Spec.Names.Plural)
			} else {
				clusterScoped = append(clusterScoped, crd.Spec.Names.Plural)
			}
		}
		Expect(clusterScoped).To(ConsistOf("terraformidentities", "terraformplanpolicies"))
		Expect(namespaced).To(HaveLen(6))

		documented, err := documentedTenantRoles(filepath.Join(repo, "docs", "permissions.md"))
		Expect(err).NotTo(HaveOccurred())
		Expect(documented).To(HaveLen(2), "docs/permissions.md, Tenants: one row per tenant role")

		want := map[string]struct {
			aggregatedInto []string
			verbs          []string
		}{
			"captf-tenant-edit": {[]string{"admin", "edit"}, tenantVerbs},
			"captf-tenant-view": {[]string{"view"}, []string{"get", "list", "watch"}},
		}
		for name, w := range want {
			By(name)
			u := all.named("ClusterRole", name)
			Expect(u).NotTo(BeNil(), "the release manifests hold no ClusterRole %s", name)
			cr, err := as[rbacv1.ClusterRole](u)
			Expect(err).NotTo(HaveOccurred())
			Expect(cr.AggregationRule).To(BeNil(), "%s aggregates into the built-in roles, it aggregates nothing itself", name)

			var into []string
			for k, v := range cr.Labels {
				if to, ok := strings.CutPrefix(k, aggregateLabel); ok {
					Expect(v).To(Equal("true"), "%s: label %s", name, k)
					into = append(into, to)
				}
			}
			slices.Sort(into)
			Expect(into).To(Equal(w.aggregatedInto), "%s: the built-in roles it is aggregated into", name)

			rendered := map[permission]bool{}
			for _, r := range cr.Rules {
				Expect(r.NonResourceURLs).To(BeEmpty(), name)
				Expect(r.ResourceNames).To(BeEmpty(), name)
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						for _, v := range r.Verbs {
							p := permission{name, g, res, v}
							Expect(g).To(Equal(infraGroup), "%s: a tenant role grants CAPTF's kinds only (no Secret, no core kind)", p)
							Expect(res).NotTo(ContainSubstring("/"), "%s: status and other subresources are the manager's", p)
							Expect(res).NotTo(Equal("secrets"), p.String())
							Expect(clusterScoped).NotTo(ContainElement(res), "%s: a cluster-scoped kind is the platform's", p)
							Expect(namespaced).To(ContainElement(res), "%s: not a kind of the release", p)
							Expect(tenantVerbs).To(ContainElement(v), "%s: a verb a tenant role never grants", p)
							rendered[p] = true
						}
					}
				}
			}
			expected := map[permission]bool{}
			for _, res := range namespaced {
				for _, v := range w.verbs {
					expected[permission{name, infraGroup, res, v}] = true
				}
			}
			Expect(sorted(rendered)).To(Equal(sorted(expected)), "%s: every namespaced kind, with exactly %v", name, w.verbs)

			d := documented[name]
			Expect(d).NotTo(BeNil(), "docs/permissions.md, Tenants, has no row for %s", name)
			slices.Sort(d.aggregatedInto)
			Expect(d.aggregatedInto).To(Equal(into), "docs/permissions.md, Tenants: %s is aggregated into", name)
			Expect(sorted(d.perms)).To(Equal(sorted(rendered)), "docs/permissions.md, Tenants: what %s grants", name)
		}

		By("bound to nobody: a platform binds them, or the built-in roles carry them")
		for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
			for _, u := range all.ofKind(kind) {
				ref, _, err := unstructured.NestedString(u.Object, "roleRef", "name")
				Expect(err).NotTo(HaveOccurred())
				Expect(want).NotTo(HaveKey(ref), "%s %s binds %s", kind, u.GetName(), ref)
			}
		}
	})
})
