package tracker

// taskView is what a job's summary and status need of one task, be it a
// local process or a YARN container.
type taskView struct {
	role          string
	rank, attempt int
	code          int
	running, done bool
}

// jobResult is the Result of a job whose tasks ended as views say.
func jobResult(st JobState, output string, views []taskView) Result {
	r := Result{State: st}
	if st == Succeeded {
		r.Output = output
	}
	for _, v := range views {
		r.Tasks = append(r.Tasks, TaskResult{Role: v.role, Rank: v.rank, Attempts: v.attempt + 1, ExitCode: v.code})
	}
	return r
}

// publishRoles counts the tasks per role, in the order roles first
// appear, into state, and calls onStatus (when set) with the status.
func publishRoles(state *State, views []taskView, onStatus func(Status)) {
	byRole := map[string]*RoleStatus{}
	var order []string
	for _, v := range views {
		rs := byRole[v.role]
		if rs == nil {
			rs = &RoleStatus{Role: v.role}
			byRole[v.role] = rs
			order = append(order, v.role)
		}
		rs.Want++
		rs.Restarts += v.attempt
		if v.running {
			rs.Running++
		}
		if v.done {
			rs.Succeeded++
		}
	}
	for _, r := range order {
		state.SetRole(*byRole[r])
	}
	if onStatus != nil {
		onStatus(state.Status())
	}
}
